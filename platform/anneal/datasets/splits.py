"""Split a version into a train and an eval version, by seed (a fraction) or by a column's values.

Both are new immutable versions of the same dataset whose ``parent`` is the split version and whose
``split`` records how they were made, so a job that names the train version is reproducible and never
saw the eval rows. The parent's file is streamed; neither side is held in memory.
"""

import hashlib
import json
import random
import uuid
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from anneal.accounts.services import audit
from anneal.datasets import storage
from anneal.datasets.ingest import _Stats
from anneal.datasets.models import DatasetVersion
from anneal.datasets.services import _next_number
from anneal.datasets.tokens import TokenizerUnavailable, token_counter
from anneal.errors import InputError

METHODS = ("seed", "column")


@dataclass
class _Side:
    path: Path
    handle: object
    digest: object
    rows: int
    stats: _Stats


def _open_side(folder: Path, stats: _Stats) -> _Side:
    path = folder / f".{uuid.uuid4().hex}.split"
    return _Side(path=path, handle=path.open("wb"), digest=hashlib.sha256(), rows=0, stats=stats)


def dataset_version_split(
    *,
    version: DatasetVersion,
    user: User,
    method: str,
    eval_fraction: float = 0.1,
    seed: int = 0,
    column: str = "",
    eval_values: list[str] | None = None,
) -> tuple[DatasetVersion, DatasetVersion]:
    """(train, eval) versions made from ``version``. InputError naming the field for a bad request."""
    if method not in METHODS:
        raise InputError(f"must be one of {', '.join(METHODS)}", field="method")
    eval_set: set[str] = set()
    if method == "seed":
        if not 0.0 < eval_fraction < 1.0:
            raise InputError("must be between 0 and 1 (exclusive), e.g. 0.1", field="eval_fraction")
        recipe = {"method": "seed", "seed": seed, "eval_fraction": eval_fraction}
    else:
        if column not in version.columns:
            raise InputError(
                f"column '{column}' is not in {version} (columns: {', '.join(version.columns)})",
                field="column",
            )
        eval_set = {str(v) for v in (eval_values or []) if str(v).strip()}
        if not eval_set:
            raise InputError("list the values of the column that go to the eval split", field="eval_values")
        recipe = {"method": "column", "column": column, "eval_values": sorted(eval_set)}
    tokenizer = version.stats.get("tokenizer", "tiny")
    try:
        tokens = token_counter(tokenizer)
    except TokenizerUnavailable:
        tokens = token_counter("tiny")
    folder = settings.DATA_DIR / "work"
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    sides = {"train": _open_side(folder, _Stats(tokens)), "eval": _open_side(folder, _Stats(tokens))}
    try:
        with storage.local_copy(version.rows_path).open("rb") as source:
            for line in source:
                if method == "seed":
                    role = "eval" if rng.random() < eval_fraction else "train"
                else:
                    row = json.loads(line)
                    role = "eval" if _cell(row.get(column)) in eval_set else "train"
                    sides[role].stats.add(row)
                side = sides[role]
                if method == "seed":
                    side.stats.add(json.loads(line))
                side.handle.write(line)
                side.digest.update(line)
                side.rows += 1
    finally:
        for side in sides.values():
            side.handle.close()
    empty = [role for role, side in sides.items() if side.rows == 0]
    if empty:
        for side in sides.values():
            side.path.unlink(missing_ok=True)
        field = "eval_fraction" if method == "seed" else "eval_values"
        raise InputError(
            f"the {empty[0]} split would be empty ({version.row_count} rows): choose another "
            + ("fraction or seed" if method == "seed" else "column or values"),
            field=field,
        )
    return _record(version=version, user=user, sides=sides, recipe=recipe, tokenizer=tokens.name)


def _cell(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


@transaction.atomic
def _record(
    *, version: DatasetVersion, user: User, sides: dict[str, _Side], recipe: dict, tokenizer: str
) -> tuple[DatasetVersion, DatasetVersion]:
    made = {}
    for role in ("train", "eval"):
        side = sides[role]
        sha = side.digest.hexdigest()
        location = storage.store_local_file(
            area="datasets",
            name=f"{version.dataset.team_id}/{sha[:16]}-{uuid.uuid4().hex[:8]}.jsonl",
            path=side.path,
        )
        made[role] = DatasetVersion.objects.create(
            dataset=version.dataset,
            number=_next_number(version.dataset),
            row_count=side.rows,
            columns=version.columns,
            sha256=sha,
            rows_path=location,
            stats=side.stats.summary(rows=side.rows, duplicates=0, skipped=0),
            parent=version,
            split_role=role,
            split={**recipe, "parent": version.pk},
            pack=version.pack,
            created_by=user,
        )
    for role, other in (("train", "eval"), ("eval", "train")):
        made[role].split = {**made[role].split, "pair": made[other].pk}
        made[role].save(update_fields=["split"])
    audit(team=version.dataset.team, user=user, action="dataset_version.split", obj=version, **recipe)
    return made["train"], made["eval"]
