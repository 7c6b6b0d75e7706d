"""Reads of what a team's verifiers may reach and use: allowed hosts (the team's and the installation's) and
the decrypted value of a team secret. Only the platform calls these, to build a verifier for that team."""

import logging

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from anneal.accounts.models import OutboundHost, Team, TeamSecret
from anneal.accounts.secret_box import SecretUnreadable, decrypt
from gpu_jobs.rewards.outbound import HostEntry, parse_host_entry

log = logging.getLogger(__name__)


def installation_hosts() -> tuple[HostEntry, ...]:
    """ANNEAL_JUDGE_ALLOWED_HOSTS, parsed; ImproperlyConfigured naming the entry that is wrong."""
    entries = []
    for text in settings.JUDGE_ALLOWED_HOSTS:
        try:
            entries.append(parse_host_entry(text))
        except ValueError as exc:
            raise ImproperlyConfigured(f"ANNEAL_JUDGE_ALLOWED_HOSTS: {exc}") from None
    return tuple(entries)


def team_hosts(team: Team | None) -> tuple[HostEntry, ...]:
    """Every host the team's verifiers may call: its owners' list, then the installation's."""
    own = []
    if team is not None:
        for text in OutboundHost.objects.filter(team=team).values_list("host", flat=True):
            try:
                own.append(parse_host_entry(text))
            except ValueError:  # stored through outbound_host_add, so valid; skip rather than fail a job
                log.warning("team %s: unreadable allowed host %r skipped", team.pk, text)
    return (*own, *installation_hosts())


def team_secret_value(team: Team | None, name: str, *, managed: bool = False) -> str | None:
    """The decrypted value of the team's secret ``name``; None when the team has none by that name (or it no
    longer decrypts: the keys changed, and the owner must set it again, which the log says)."""
    if team is None:
        return None
    secret = TeamSecret.objects.filter(team=team, name=name, managed=managed).first()
    if secret is None:
        return None
    try:
        return decrypt(secret.ciphertext)
    except SecretUnreadable:
        log.warning(
            "team %s: secret %r does not decrypt with ANNEAL_SECRETS_KEY; set it again", team.pk, name
        )
        return None


def team_secret_names(team: Team) -> list[str]:
    return list(TeamSecret.objects.filter(team=team, managed=False).values_list("name", flat=True))
