from django.apps import AppConfig


class VerifiersConfig(AppConfig):
    name = "anneal.verifiers"
    label = "verifiers"
