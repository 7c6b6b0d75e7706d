from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "anneal.accounts"
    label = "accounts"
