from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    name = "anneal.datasets"
    label = "datasets"
