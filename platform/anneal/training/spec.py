"""Launch-time checks of the parts of a job spec that need the database or the model store: the dataset
versions a job mixes, the domains in them, which verifier scores which domain, and the base model.

The user's settings are gpu_jobs' ``TrainingSettings``: ``settings_check`` builds them from a launch's params
(their own rules, in ``__post_init__``); the other checks add what only the platform knows. Each raises
``InputError`` naming the field.
"""

from django.conf import settings

from anneal.accounts.models import Team
from anneal.datasets.models import DatasetVersion
from anneal.errors import InputError
from gpu_jobs.domains import DEFAULT_DOMAIN, check_domain_weights, domain_counts, domains_without_verifier
from gpu_jobs.model_store import UnknownModel, check_model, list_models
from gpu_jobs.spec import SETTING_NAMES, TrainingSettings

# anneal.datasets.ingest's names in a version's statistics for rows without a domain and for domains past
# its counting limit.
_NO_DOMAIN, _OTHER_DOMAINS = "(none)", "(other)"
# Above this many rows a version without domain statistics is not read at launch; the engine checks it.
_COUNT_ROWS_UP_TO = 100_000


def available_models() -> list[dict]:
    """The models a job may start from on this host (the model store, plus hub ids where allowed)."""
    return [model.to_dict() for model in list_models(settings.MODEL_STORE)]


def model_check(name: object) -> None:
    try:
        check_model(name, store=settings.MODEL_STORE, allow_hub=settings.MODEL_ALLOW_HUB)
    except UnknownModel as error:
        raise InputError(str(error), field="params.model") from None


def dataset_versions_check(*, team: Team, ids: list) -> list[DatasetVersion]:
    """The team's versions with these ids, in order, each once; the first is the job's main version."""
    if not isinstance(ids, list) or not ids:
        raise InputError("choose at least one dataset version", field="dataset_versions")
    versions = []
    for index, version_id in enumerate(ids):
        version = (
            DatasetVersion.objects.filter(pk=version_id, dataset__team=team).select_related("dataset").first()
            if isinstance(version_id, int) and not isinstance(version_id, bool)
            else None
        )
        if version is None:
            raise InputError(
                f"no dataset version with id {version_id!r} in team '{team.name}'",
                field=f"dataset_versions[{index}]",
            )
        if version in versions:
            raise InputError(f"{version} is chosen twice", field=f"dataset_versions[{index}]")
        versions.append(version)
    return versions


def version_domains(version: DatasetVersion) -> dict[str, int] | None:
    """Rows per domain from the version's statistics (rows without one under "all"); None when unknown (no
    statistics, or more domains than the statistics count)."""
    counts = (version.stats or {}).get("domains")
    if not isinstance(counts, dict):
        # Versions the platform made itself may carry no statistics: count a small one's rows directly.
        if version.row_count > _COUNT_ROWS_UP_TO:
            return None
        from anneal.datasets.storage import read_rows

        counts = dict(domain_counts(read_rows(version.rows_path)))
    if _OTHER_DOMAINS in counts:
        return None
    out: dict[str, int] = {}
    for name, count in counts.items():
        key = DEFAULT_DOMAIN if name == _NO_DOMAIN else str(name)
        out[key] = out.get(key, 0) + int(count)
    return out


def domains_check(
    *, versions: list[DatasetVersion], domain_weights: object, verifiers: list[dict]
) -> dict[str, int] | None:
    """Check the domain weights and that every domain has a weighted verifier, against the domains the
    versions' statistics list. Returns rows per domain over all versions (None when a version's domains are
    not known: the engine then checks them when the job starts)."""
    if domain_weights is None:
        domain_weights = {}
    if not isinstance(domain_weights, dict):
        raise InputError("must be an object {domain: weight}", field="domain_weights")
    for index, verifier in enumerate(verifiers):
        domains = verifier.get("domains")
        if domains is not None and not (
            isinstance(domains, list) and all(isinstance(d, str) and d for d in domains)
        ):
            raise InputError(
                "must be a list of domain names (empty or absent: every domain)",
                field=f"verifiers[{index}].domains",
            )
    totals: dict[str, int] = {}
    for version in versions:
        counts = version_domains(version)
        if counts is None:
            return None
        for name, count in counts.items():
            totals[name] = totals.get(name, 0) + count
    try:
        check_domain_weights(domain_weights, totals)
    except ValueError as error:
        field, _, message = str(error).partition(": ")
        raise InputError(message, field=field) from None
    for index, verifier in enumerate(verifiers):
        unknown = sorted(set(verifier.get("domains") or ()) - set(totals))
        if unknown:
            raise InputError(
                f"no row of the chosen data has domain(s) {', '.join(unknown)}; domains: "
                f"{', '.join(sorted(totals))}",
                field=f"verifiers[{index}].domains",
            )
    orphans = domains_without_verifier(totals, verifiers)
    if orphans:
        raise InputError(
            f"no verifier with a weight above 0 scores domain(s) {', '.join(orphans)}: choose one for each "
            "domain (a verifier without domains scores every domain)",
            field="verifiers",
        )
    return totals


def settings_check(params: dict, *, row_count: int) -> TrainingSettings:
    """The user's settings from a launch's ``params`` (defaults for the rest), checked alone and against the
    number of rows the job trains on: the settings are whole here, no placeholder stands in for anything."""
    unknown = sorted(set(params) - set(SETTING_NAMES))
    if unknown:
        raise InputError(f"unknown setting(s) {unknown}; known: {list(SETTING_NAMES)}", field="params")
    try:
        settings = TrainingSettings(**params)
        settings.check_row_count(row_count)
    except (TypeError, ValueError) as exc:
        message = str(exc)
        if message.startswith("rows:"):
            raise InputError(
                message.replace("rows", "the dataset version", 1), field="dataset_version"
            ) from None
        # The engine's messages start with the field: "max_steps: ...", "environment.max_turns: ...".
        name = message.partition(":")[0].partition(".")[0]
        raise InputError(message, field=f"params.{name}" if name in SETTING_NAMES else "params") from None
    return settings
