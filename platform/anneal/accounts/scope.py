"""Which teams a request may see, and which team it acts in, for pages and the API alike."""

from django.db.models import QuerySet
from rest_framework.exceptions import PermissionDenied as ApiPermissionDenied

from anneal.accounts.models import ApiToken, Team
from anneal.accounts.selectors import can_write, teams_for

SESSION_KEY = "anneal_team_id"


def request_teams(request) -> QuerySet[Team]:
    """An API token sees only its own team; a browser session sees every team of its user."""
    auth = getattr(request, "auth", None)
    if isinstance(auth, ApiToken):
        return Team.objects.filter(pk=auth.team_id)
    return teams_for(request.user)


def page_team(request) -> Team | None:
    teams = teams_for(request.user)
    chosen = request.session.get(SESSION_KEY)
    return (teams.filter(pk=chosen).first() if chosen else None) or teams.first()


def acting_team(request) -> Team | None:
    """The team new objects are created in: the token's team, or the session's chosen team."""
    auth = getattr(request, "auth", None)
    if isinstance(auth, ApiToken):
        return auth.team
    return page_team(request)


def require_write(request, team: Team) -> None:
    if not can_write(request.user, team):
        raise ApiPermissionDenied(
            f"Your role in team '{team.name}' is viewer: it may look but not change anything."
        )
