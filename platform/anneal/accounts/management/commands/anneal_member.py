from django.core.management.base import BaseCommand, CommandError

from anneal.accounts.models import Role
from anneal.accounts.services import api_token_create, member_ensure


class Command(BaseCommand):
    help = "Create or update a user with a role in a team (and its organisation); optionally print a new API token."

    def add_arguments(self, parser):
        parser.add_argument("--username", required=True)
        parser.add_argument("--password")
        parser.add_argument("--organisation", required=True)
        parser.add_argument("--team", required=True)
        parser.add_argument("--role", choices=Role.values, default=Role.EXPERT)
        parser.add_argument(
            "--staff", action="store_true", help="Also make the user an admin (staff, superuser)."
        )
        parser.add_argument(
            "--token", metavar="NAME", help="Create an API token with this name and print it."
        )

    def handle(self, *args, **opts):
        try:
            user, team = member_ensure(
                username=opts["username"],
                password=opts["password"],
                organisation=opts["organisation"],
                team=opts["team"],
                role=opts["role"],
                staff=opts["staff"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if opts["token"]:
            _, raw = api_token_create(user=user, team=team, name=opts["token"])
            self.stdout.write(raw)
        else:
            self.stdout.write(f"{user.username} is {opts['role']} in {team}")
