"""Make a domain pack: reasoning-gym or long-context rows as one dataset version, and a verifier per domain
(task or family); or the agent repo-fix task pack."""

from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import transaction

from anneal.accounts.models import Team
from anneal.datasets.ingest import _Stats
from anneal.datasets.models import DatasetVersion
from anneal.datasets.pack_catalogue import PackError, check_pack_request, generate_task, long_context_checks
from anneal.datasets.services import check_tokenizer, dataset_version_create_from_rows
from anneal.datasets.tokens import token_counter
from anneal.errors import InputError
from anneal.verifiers.models import Verifier
from anneal.verifiers.services import verifier_create
from gpu_jobs.long_context import FAMILIES, RequestError, check_request, generate_rows


@dataclass
class PackResult:
    version: DatasetVersion
    verifiers: list[Verifier]
    dropped: dict[str, int]


def domain_pack_create(
    *, team: Team, user: User, name: str, tasks: list[str], size: int, seed: int, difficulty: int | None
) -> PackResult:
    """Generate ``size`` rows per task, freeze them as a version of dataset ``name`` and create one
    verifier per task, named ``<name>/<task>``. All or nothing: an error stores nothing."""
    name = (name or "").strip()
    if not name:
        raise InputError("give the dataset a name", field="name")
    try:
        check_pack_request(tasks=tasks, size=size, seed=seed, difficulty=difficulty)
    except PackError as exc:
        raise InputError(exc.message, field=exc.field) from None
    taken = set(
        Verifier.objects.filter(team=team, name__in=[f"{name}/{t}" for t in tasks]).values_list(
            "name", flat=True
        )
    )
    if taken:
        raise InputError(
            f"verifier(s) {', '.join(sorted(taken))} already exist: choose another name", field="name"
        )
    made = [generate_task(task=task, size=size, seed=seed, difficulty=difficulty) for task in tasks]
    rows = [row for task in made for row in task.rows]
    stats = _Stats(token_counter("tiny"))
    for row in rows:
        stats.add(row)
    dropped = {task.task: task.dropped for task in made if task.dropped}
    recipe = {"source": "reasoning_gym", "tasks": tasks, "size": size, "seed": seed, "difficulty": difficulty}
    with transaction.atomic():
        version = dataset_version_create_from_rows(
            team=team,
            user=user,
            name=name,
            rows=rows,
            stats=stats.summary(rows=len(rows), duplicates=0, skipped=sum(dropped.values())),
            pack={**recipe, "dropped": dropped},
        )
        verifiers = [
            verifier_create(team=team, user=user, name=f"{name}/{task.task}", spec=task.spec) for task in made
        ]
    return PackResult(version=version, verifiers=verifiers, dropped=dropped)


def agent_task_pack_create(
    *, team: Team, user: User, name: str, limit: int | None = None, offset: int = 0, mutants: int = 0
) -> DatasetVersion:
    """The repo-fix task pack (gpu_jobs.agent.taskpack: small repositories, a bug planted in each, their
    tests) as a new version of dataset ``name``: ``limit`` tasks (all when None) from the ``offset``-th on, so
    a training set and a held-out set of other repositories can be made apart; with ``mutants``, each task is
    followed by up to that many other bugs in the same repository (gpu_jobs.agent.taskpack.mutants), so a
    training set holds more tasks without more repositories. Its rows carry ``files``,
    ``test_files``, ``solution`` and ``fix_diff``: a job trains on it with an environment
    (GRPOJobConfig.environment), and bench/agent_episodes.py runs the same rows as a benchmark."""
    from gpu_jobs.agent.taskpack import TASKS, pack_rows, with_mutants
    from gpu_jobs.agent.taskpack.mutants import MAX_MUTANTS

    name = (name or "").strip()
    if not name:
        raise InputError("give the dataset a name", field="name")
    if not 0 <= offset < len(TASKS):
        raise InputError(
            f"must be between 0 and {len(TASKS) - 1} (the pack has {len(TASKS)} tasks)", field="offset"
        )
    if limit is not None and not 1 <= limit <= len(TASKS) - offset:
        raise InputError(
            f"must be between 1 and {len(TASKS) - offset} (the tasks in the pack from offset {offset} on)",
            field="limit",
        )
    if isinstance(mutants, bool) or not 0 <= mutants <= MAX_MUTANTS:
        raise InputError(f"must be between 0 and {MAX_MUTANTS} per repository", field="mutants")
    rows = with_mutants(pack_rows()[offset:][:limit], mutants)
    stats = _Stats(token_counter("tiny"))
    for row in rows:
        stats.add(row)
    recipe = {"source": "agent_taskpack", "pack": "repo_fix", "tasks": [row["task"] for row in rows]}
    if mutants:
        recipe["mutants"] = mutants
    with transaction.atomic():
        return dataset_version_create_from_rows(
            team=team,
            user=user,
            name=name,
            rows=rows,
            stats=stats.summary(rows=len(rows), duplicates=0, skipped=0),
            pack=recipe,
        )


def long_context_pack_create(
    *,
    team: Team,
    user: User,
    name: str,
    families: list[str],
    lengths: list[int],
    size: int,
    seed: int = 0,
    tokenizer: str = "tiny",
) -> PackResult:
    """Long-context rows (gpu_jobs.long_context) for every family at every length, ``size`` each, as one
    version of dataset ``name``, and one verifier per family, named ``<name>/<family>``. Lengths are counted
    in ``tokenizer``'s tokens ("tiny", whose count is every tiny-family model's, or a model folder of the
    store with a tokenizer.json), and so are the version's statistics. All or nothing."""
    name = (name or "").strip()
    if not name:
        raise InputError("give the dataset a name", field="name")
    try:
        check_request(families=families, lengths=lengths, size=size, seed=seed)
    except RequestError as exc:
        raise InputError(exc.message, field=exc.field) from None
    offered = long_context_checks()
    for family in families:
        if not offered[family].ok:
            raise InputError(
                f"family '{family}' failed its check ({offered[family].reason})", field="families"
            )
    # The tiny family shares one tokenizer; its long-context model need not be built to count its tokens.
    counter = token_counter(check_tokenizer("tiny" if tokenizer in ("tiny", "tiny-long") else tokenizer))
    taken = set(
        Verifier.objects.filter(team=team, name__in=[f"{name}/{f}" for f in families]).values_list(
            "name", flat=True
        )
    )
    if taken:
        raise InputError(
            f"verifier(s) {', '.join(sorted(taken))} already exist: choose another name", field="name"
        )
    rows = generate_rows(
        families=families,
        lengths=lengths,
        size=size,
        seed=seed,
        count=lambda text: counter.count([text])[0],
    )
    stats = _Stats(counter)
    for row in rows:
        stats.add(row)
    recipe = {
        "source": "long_context",
        "families": families,
        "lengths": sorted(lengths),
        "size": size,
        "seed": seed,
        "tokenizer": counter.name,
    }
    with transaction.atomic():
        version = dataset_version_create_from_rows(
            team=team,
            user=user,
            name=name,
            rows=rows,
            stats=stats.summary(rows=len(rows), duplicates=0, skipped=0),
            pack=recipe,
        )
        verifiers = [
            verifier_create(team=team, user=user, name=f"{name}/{family}", spec=FAMILIES[family].spec)
            for family in families
        ]
    return PackResult(version=version, verifiers=verifiers, dropped={})
