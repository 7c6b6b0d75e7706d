from django.apps import AppConfig


class DeploymentsConfig(AppConfig):
    name = "anneal.deployments"
    label = "deployments"
