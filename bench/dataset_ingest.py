"""Dataset ingest throughput and memory: the full ingest (read, validate, map, de-duplicate, count tokens and
domains, write the frozen file) against a plain pandas read of the same JSONL file, in the same run.

Each measurement runs in its own subprocess, so its peak resident memory (ru_maxrss) is its own. The
ingest is measured at two sizes to show that its memory stays flat as the file grows.

    .venv/bin/python bench/dataset_ingest.py              # 250,000 and 1,000,000 rows
    .venv/bin/python bench/dataset_ingest.py --rows 100000 --small 25000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_file(path: Path, rows: int) -> None:
    """Arithmetic prompts with answers, tests, a domain and a difficulty; about 1% exact duplicates."""
    rng = random.Random(0)
    domains = ["addition", "subtraction", "multiplication", "division", "logic", "code"]
    with path.open("w") as out:
        previous = ""
        for index in range(rows):
            if previous and rng.random() < 0.01:
                out.write(previous)
                continue
            a, b = rng.randrange(10**6), rng.randrange(1, 10**4)
            row = {
                "id": index,
                "prompt": f"Question {index}: what is {a} + {b}? Answer with the number only.",
                "answer": str(a + b),
                "tests": [f"assert result == {a + b}"],
                "domain": domains[index % len(domains)],
                "difficulty": index % 5,
            }
            previous = json.dumps(row) + "\n"
            out.write(previous)


def child_ingest(path: str) -> dict:
    sys.path[:0] = [str(ROOT / "platform"), str(ROOT)]
    from anneal.datasets.ingest import ingest_file
    from anneal.datasets.mapping import Mapping
    from anneal.datasets.readers import ReadLimits
    from anneal.datasets.tokens import token_counter

    tokens = token_counter("tiny")  # loaded before the clock starts, like a warm worker
    mapping = Mapping.from_dict(
        {
            "prompt": "prompt",
            "answer": "answer",
            "tests": "tests",
            "domain": "domain",
            "difficulty": "difficulty",
        }
    )
    target = Path(path).with_suffix(".frozen")
    started = time.perf_counter()
    report = ingest_file(
        path=Path(path),
        file_name="bench.jsonl",
        mapping=mapping,
        target=target,
        limits=ReadLimits(),
        tokens=tokens,
        on_progress=lambda p: None,
    )
    seconds = time.perf_counter() - started
    target.unlink(missing_ok=True)
    return {
        "rows_read": report.rows_read,
        "kept": report.rows,
        "duplicates": report.duplicates,
        "seconds": seconds,
    }


def child_pandas(path: str) -> dict:
    import pandas as pd

    started = time.perf_counter()
    frame = pd.read_json(path, lines=True)
    seconds = time.perf_counter() - started
    return {"rows_read": len(frame), "kept": len(frame), "duplicates": 0, "seconds": seconds}


def measure(kind: str, path: Path) -> dict:
    """Run one measurement in a fresh interpreter; add its peak RSS (MB)."""
    code = (
        f"import json, resource, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import dataset_ingest as b; "
        "r = getattr(b, 'child_' + sys.argv[1])(sys.argv[2]); "
        "r['peak_mb'] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024; print(json.dumps(r))"
    )
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    out = subprocess.run(
        [sys.executable, "-c", code, kind, str(path)], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def baseline_mb() -> float:
    """Peak RSS of an interpreter that only imports what the ingest imports (the fixed cost)."""
    code = (
        "import resource, sys; sys.path[:0] = [{!r}, {!r}]; "
        "from anneal.datasets.ingest import ingest_file; from anneal.datasets.tokens import token_counter; "
        "import numpy; token_counter('tiny'); print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"
    ).format(str(ROOT / "platform"), str(ROOT))
    return float(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=250_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        results = []
        for rows in (args.small, args.rows):
            path = Path(folder) / f"rows-{rows}.jsonl"
            make_file(path, rows)
            size_mb = path.stat().st_size / 2**20
            for kind in ("ingest", "pandas"):
                result = measure(kind, path)
                results.append((rows, size_mb, kind, result))
            path.unlink()
        fixed = baseline_mb()
    print(f"{'rows':>10} {'file MB':>8} {'what':<34} {'rows/s':>10} {'seconds':>8} {'peak MB':>8}")
    names = {"ingest": "full ingest (validate, dedupe, stats)", "pandas": "pandas.read_json(lines=True)"}
    for rows, size_mb, kind, r in results:
        rate = r["rows_read"] / r["seconds"]
        print(
            f"{rows:>10} {size_mb:>8.1f} {names[kind]:<34} {rate:>10.0f} {r['seconds']:>8.2f} {r['peak_mb']:>8.0f}"
        )
    ingest = {rows: r for rows, _, kind, r in results if kind == "ingest"}
    pandas = {rows: r for rows, _, kind, r in results if kind == "pandas"}
    small, large = ingest[args.small], ingest[args.rows]
    print()
    print(f"interpreter + ingest imports alone: {fixed:.0f} MB peak")
    print(
        f"ingest peak memory: {small['peak_mb']:.0f} MB at {args.small} rows, {large['peak_mb']:.0f} MB at "
        f"{args.rows} rows (+{large['peak_mb'] - small['peak_mb']:.0f} MB for {args.rows / args.small:.0f}x the rows; "
        f"pandas: +{pandas[args.rows]['peak_mb'] - pandas[args.small]['peak_mb']:.0f} MB)"
    )
    print(
        f"ingest vs pandas at {args.rows} rows: {large['seconds'] / pandas[args.rows]['seconds']:.2f}x the time, "
        f"{large['peak_mb'] / pandas[args.rows]['peak_mb']:.2f}x the peak memory; "
        f"{large['duplicates']} duplicates removed"
    )


if __name__ == "__main__":
    main()
