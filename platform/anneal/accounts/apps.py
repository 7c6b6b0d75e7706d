from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "anneal.accounts"
    label = "accounts"

    def ready(self) -> None:
        from anneal.accounts.outbound_hosts import installation_hosts

        installation_hosts()  # a wrong ANNEAL_JUDGE_ALLOWED_HOSTS entry stops start-up with its reason
