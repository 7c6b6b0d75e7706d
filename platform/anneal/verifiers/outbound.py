"""The outbound policy of a team's verifiers, built for gpu_jobs.rewards: its allowed hosts, its secrets and
its deployments reachable as judges, looked up only when a verifier asks (a secret is decrypted, a judge key
issued, at the moment a model_judge is built)."""

from collections.abc import Iterator, Mapping

from django.conf import settings
from django.db import transaction

from anneal.accounts.models import Team, TeamSecret
from anneal.accounts.outbound_hosts import team_hosts, team_secret_value
from anneal.accounts.secret_box import encrypt
from anneal.errors import InputError
from gpu_jobs.rewards.outbound import JudgeRoute, Outbound

JUDGE_KEY_PREFIX = "deployment-judge:"  # a managed secret's name; user names cannot hold ':'


class _Lazy(Mapping):
    """A read-only mapping that looks each value up on access and never lists its keys (nothing to leak)."""

    def __init__(self, lookup) -> None:
        self._lookup = lookup

    def __getitem__(self, name: str):
        value = self._lookup(name)
        if value is None:
            raise KeyError(name)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def team_outbound(team: Team | None) -> Outbound:
    """What ``team``'s verifiers may reach (None: no team, so only the installation's hosts, no secrets)."""
    return Outbound(
        allowed_hosts=team_hosts(team),
        secrets=_Lazy(lambda name: team_secret_value(team, name)),
        deployments=_Lazy(lambda name: judge_route(team, name)),
    )


def judge_route(team: Team | None, name: str) -> JudgeRoute | None:
    """How a judge calls the team's deployment ``name`` through the platform's /v1 (metered like any call):
    with a key bound to that deployment alone, issued on first use and kept encrypted as a managed secret."""
    from anneal.deployments.models import Deployment
    from anneal.deployments.selectors import key_lookup
    from anneal.deployments.services import deployment_key_create

    if team is None:
        return None
    deployment = Deployment.objects.filter(team=team, name=name).first()
    if deployment is None:
        return None
    base_url = settings.BASE_URL.rstrip("/") + "/v1"
    secret_name = f"{JUDGE_KEY_PREFIX}{deployment.pk}"
    with transaction.atomic():
        Deployment.objects.select_for_update().filter(pk=deployment.pk).first()  # one key issued at a time
        raw = team_secret_value(team, secret_name, managed=True)
        key = key_lookup(raw) if raw else None
        if key is not None and key.is_active and key.deployment_id == deployment.pk:
            return JudgeRoute(base_url=base_url, api_key=raw)
        _, raw = deployment_key_create(
            team=team, user=None, name=f"verifier judge ({deployment.name})", deployment=deployment
        )
        TeamSecret.objects.update_or_create(
            team=team, name=secret_name, defaults={"ciphertext": encrypt(raw), "managed": True}
        )
    return JudgeRoute(base_url=base_url, api_key=raw)


def judge_spec_check(spec: dict, *, team: Team | None, field: str = "spec") -> None:
    """InputError naming the field when a model_judge in ``spec`` (a normalised spec, composites walked)
    names a secret or deployment the team lacks, or an endpoint host the team may not call. Checks names and
    the allowed list only: resolving the host happens, checked again, on each call."""
    import httpx

    from anneal.deployments.models import Deployment

    if spec.get("type") == "composite":
        for index, part in enumerate(spec["parts"]):
            judge_spec_check(part["spec"], team=team, field=f"{field}.parts[{index}].spec")
        return
    if spec.get("type") != "model_judge":
        return
    team_name = f"team '{team.name}'" if team is not None else "this request (no team)"
    if spec["deployment"] is not None:
        if team is None or not Deployment.objects.filter(team=team, name=spec["deployment"]).exists():
            raise InputError(
                f"{team_name} has no deployment named '{spec['deployment']}'", field=f"{field}.deployment"
            )
        return
    secret = spec["api_key_secret"]
    if secret is not None and (
        team is None or not TeamSecret.objects.filter(team=team, name=secret, managed=False).exists()
    ):
        raise InputError(
            f"{team_name} has no secret named '{secret}': add it under Team settings → Secrets",
            field=f"{field}.api_key_secret",
        )
    url = httpx.URL(spec["endpoint"])
    port = url.port or (443 if url.scheme == "https" else 80)
    host = url.raw_host.decode("ascii")
    if not Outbound(allowed_hosts=team_hosts(team)).allows(host, port):
        raise InputError(
            f"{host}:{port} is not an endpoint {team_name} may call: an owner allows it under "
            "Team settings → Outbound endpoints",
            field=f"{field}.endpoint",
        )
