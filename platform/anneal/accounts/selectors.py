"""Reads that scope every object to the teams a user belongs to."""

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Model, QuerySet
from django.http import Http404

from anneal.accounts.models import WRITE_ROLES, Membership, Team


def teams_for(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Team]:
    if not user.is_authenticated:
        return Team.objects.none()
    return Team.objects.filter(memberships__user=user).select_related("organisation").order_by("id")


def role_in(user: AbstractBaseUser | AnonymousUser, team: Team) -> str | None:
    if not user.is_authenticated:
        return None
    return Membership.objects.filter(user=user, team=team).values_list("role", flat=True).first()


def can_write(user: AbstractBaseUser | AnonymousUser, team: Team) -> bool:
    return role_in(user, team) in WRITE_ROLES


def scoped(queryset: QuerySet, teams: QuerySet[Team] | list[Team], *, team_path: str = "team") -> QuerySet:
    return queryset.filter(**{f"{team_path}__in": teams})


def get_scoped_or_404(queryset: QuerySet, teams, pk, *, team_path: str = "team") -> Model:
    """Fetch one object of the given teams; another team's object is indistinguishable from a missing one."""
    try:
        return scoped(queryset, teams, team_path=team_path).get(pk=pk)
    except (queryset.model.DoesNotExist, ValueError, TypeError):
        raise Http404(f"No {queryset.model._meta.verbose_name} with id {pk}") from None
