"""Shared pieces of the REST views: team scoping and write checks, the same rules as the pages."""

from rest_framework.views import APIView

from anneal.accounts.scope import acting_team, request_teams, require_write
from anneal.accounts.selectors import get_scoped_or_404
from anneal.errors import InputError


class TeamScopedView(APIView):
    def teams(self):
        return request_teams(self.request)

    def get_scoped(self, queryset, pk, *, team_path: str = "team"):
        return get_scoped_or_404(queryset, self.teams(), pk, team_path=team_path)

    def writable_team(self):
        team = acting_team(self.request)
        if team is None:
            raise InputError("you are not a member of any team", field="team")
        require_write(self.request, team)
        return team

    def check_write(self, team) -> None:
        require_write(self.request, team)
