from django.apps import AppConfig


class TrainingConfig(AppConfig):
    name = "anneal.training"
    label = "training"
