"""What the page views share: the team a page acts in, the write check, and service errors shown on forms.

The rules are those of the REST API (anneal.accounts.scope): a page lists the chosen team's objects, a
detail page finds an object in any team of the user (another team's object is a 404), and only owners
and experts change anything (a viewer gets 403).
"""

from django import forms
from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet

from anneal.accounts.models import Team
from anneal.accounts.scope import page_team
from anneal.accounts.selectors import can_write, get_scoped_or_404, teams_for
from anneal.errors import InputError


def get_visible_or_404(request, queryset: QuerySet, pk: int, *, team_path: str = "team") -> Model:
    return get_scoped_or_404(queryset, teams_for(request.user), pk, team_path=team_path)


def check_write(request, team: Team) -> None:
    """PermissionDenied (a 403 page) unless the user may change things in ``team``."""
    if not can_write(request.user, team):
        raise PermissionDenied(
            f"Your role in team '{team.name}' is viewer: you may look but not change anything."
        )


def writable_team(request) -> Team:
    """The chosen team, when the user may create things in it; PermissionDenied otherwise."""
    team = page_team(request)
    if team is None:
        raise PermissionDenied(
            "You are not a member of any team yet: ask an administrator to add you to one."
        )
    check_write(request, team)
    return team


def form_show_errors(form: forms.Form, exc: InputError, *, fields: dict[str, str] | None = None) -> None:
    """Attach each error of ``exc`` to the form field it names, so it shows next to what the user typed.

    ``fields`` maps a service's field name (``spec.timeout_s``) to a form field (``timeout_s``); a name that
    is a form field already needs no entry. Errors naming no field of the form go above the form, prefixed
    with their name so the user still learns where the problem is.
    """
    fields = fields or {}
    for error in exc.errors:
        name = error.get("field", "")
        message = error.get("message", "")
        if "row" in error:
            message = f"row {error['row']}: {message}"
        # Engine messages repeat the field name ("max_steps: must be >= 1"); next to the field it is noise.
        short = name.rsplit(".", 1)[-1]
        if short and message.startswith(f"{short}: "):
            message = message[len(short) + 2 :]
        target = fields.get(name, name)
        if target in form.fields:
            form.add_error(target, message)
        elif name and name != "non_field_errors":
            form.add_error(None, f"{name}: {message}")
        else:
            form.add_error(None, message)
