"""Scores per second for each verifier type on a batch of 1,000 (row, completion) pairs.

Each type scores the same kind of arithmetic rows (a mix of right and wrong answers) through the real
engine (`build_scorer(spec).score_batch`; `table` and `sql_result` get the same answers as a CSV table and a
query), after one warm-up batch of 8 so that one-off costs (importing
math-verify or sacreBLEU, loading the MiniLM model) are not counted. The code types go through the real
local sandbox (bubblewrap); the model judge talks to a tiny OpenAI-compatible server on 127.0.0.1 that
answers at once, so its figure is the engine's overhead, not a model's speed.

Run: .venv/bin/python bench/verifier_throughput.py [--batch 1000] [--types numeric,math,...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from gpu_jobs.rewards import build_scorer  # noqa: E402
from gpu_jobs.rewards.outbound import Outbound, parse_host_entry  # noqa: E402
from sandboxes.client import SandboxClient  # noqa: E402


class Judge(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps({"choices": [{"message": {"content": "Fine. Score: 7"}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _bar_svg(value: int) -> str:
    """A bar as long as `value` (0-185) on a 64x64 canvas: the render rows' reference."""
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64">'
        f'<rect x="2" y="20" width="{1 + value // 3}" height="24" fill="black"/></svg>'
    )


def _off_by(row: dict, done: str) -> int:
    """How far the shared completion's answer is from the row's (0 when right)."""
    return int(done.split("<answer>")[1].split("</answer>")[0]) - int(row["answer"])


def samples(n: int) -> tuple[list[dict], list[str]]:
    rows, completions = [], []
    for i in range(n):
        a, b = i % 97, (i * 7) % 89
        answer = a + b if i % 3 else a + b + 1  # two in three right
        rows.append(
            {
                "prompt": f"{a}+{b}=",
                "answer": str(a + b),
                "tests": [f"assert result == {a + b}"],
                "table": [{"a": a, "b": b, "sum": a + b}],
                "schema": f"CREATE TABLE t (a INTEGER, b INTEGER); INSERT INTO t VALUES ({a}, {b});",
                "query": "SELECT a + b FROM t",
                "io_tests": [{"stdin": f"{a} {b}\n", "stdout": f"{a + b}\n"}],
                "svg": _bar_svg(a + b),
                "sheet": {"A1": a, "B1": b},
                "targets": ["C1"],
                "formulas": {"C1": "=A1+B1"},
            }
        )
        completions.append(f"<think>{a} plus {b}</think><answer>{answer}</answer>\n```python\n{a} + {b}\n```")
    return rows, completions


# Types whose answers are not the shared completion's: (row, shared completion) -> this type's completion.
OWN_COMPLETIONS = {
    # C and JavaScript programs that read the two numbers and print the shared completion's answer's error.
    "code_tests_c": lambda row, done: (
        '```c\n#include <stdio.h>\nint main(void) { int a, b; scanf("%d %d", &a, &b); '
        f'printf("%d\\n", a + b + {_off_by(row, done)}); return 0; }}\n```'
    ),
    "render": lambda row, done: _bar_svg(int(row["answer"]) + 6 * _off_by(row, done)),
    "spreadsheet": lambda row, done: f"C1: =A1+B1+{_off_by(row, done)}",
    "code_tests_javascript": lambda row, done: (
        "```js\nconst [a, b] = require('fs').readFileSync(0, 'utf8').split(' ').map(Number);\n"
        f"console.log(a + b + {_off_by(row, done)});\n```"
    ),
    "table": lambda row, done: (
        f"a,b,sum\n{row['table'][0]['a']},{row['table'][0]['b']},"
        + done.split("<answer>")[1].split("</answer>")[0]
    ),
    "sql_result": lambda row, done: (
        "```sql\nSELECT a + b"
        + ("" if done.split("<answer>")[1].split("</answer>")[0] == row["answer"] else " + 1")
        + " FROM t\n```"
    ),
}


def specs(judge_url: str) -> dict[str, dict]:
    return {
        "exact_match": {"type": "exact_match", "extract": "tag"},
        "regex": {
            "type": "regex",
            "pattern": r"<answer>(\d+)</answer>",
            "group": 1,
            "reference_field": "answer",
        },
        "numeric": {"type": "numeric", "extract": "tag"},
        "math": {"type": "math", "extract": "tag"},
        "json": {"type": "json", "schema": {"type": "object"}},
        "table": {"type": "table", "reference_field": "table"},
        "sql_result": {"type": "sql_result", "reference_field": "query"},
        "keywords": {"type": "keywords", "required": ["plus"], "forbidden": ["minus"]},
        "format": {"type": "format"},
        "similarity_bleu": {"type": "similarity", "metric": "bleu", "extract": "tag"},
        "similarity_rouge_l": {"type": "similarity", "metric": "rouge_l", "extract": "tag"},
        "similarity_chrf": {"type": "similarity", "metric": "chrf", "extract": "tag"},
        "embedding": {"type": "embedding", "extract": "tag"},
        "python_tests": {"type": "python_tests"},
        "code_tests_c": {"type": "code_tests", "language": "c", "tests_field": "io_tests"},
        "render": {"type": "render", "reference_field": "svg"},
        "spreadsheet": {"type": "spreadsheet"},
        "code_tests_javascript": {"type": "code_tests", "language": "javascript", "tests_field": "io_tests"},
        "custom_python": {
            "type": "custom_python",
            "code": "def score(row, completion):\n    return 1.0 if row['answer'] in completion else 0.0\n",
        },
        "model_judge": {"type": "model_judge", "endpoint": judge_url, "model": "judge"},
        "composite": {
            "type": "composite",
            "mode": "formula",
            "formula": "correct * (0.8 + 0.2 * formatted)",
            "parts": [
                {"name": "correct", "spec": {"type": "numeric", "extract": "tag"}, "weight": 1},
                {"name": "formatted", "spec": {"type": "format"}, "weight": 0},
            ],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--types", default="", help="comma-separated names from the table (default: all)")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Judge)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    all_specs = specs(f"http://127.0.0.1:{server.server_address[1]}/v1")
    chosen = [name.strip() for name in args.types.split(",") if name.strip()] or list(all_specs)
    rows, completions = samples(args.batch)
    sandbox = SandboxClient()
    # The local judge listens on loopback, which a judge reaches only when that exact host is allowed.
    judge_outbound = Outbound(allowed_hosts=(parse_host_entry("127.0.0.1"),))
    print(f"{'type':<20} {'scores/s':>10} {'seconds':>9} {'mean score':>11}   batch of {args.batch}")
    for name in chosen:
        scorer = build_scorer(all_specs[name], sandbox=sandbox, outbound=judge_outbound)
        own = OWN_COMPLETIONS.get(name)
        answers = [own(r, c) for r, c in zip(rows, completions, strict=True)] if own else completions
        scorer.score_batch(rows[:8], answers[:8])  # warm-up: imports, model loading
        start = time.perf_counter()
        results = scorer.score_batch(rows, answers)
        elapsed = time.perf_counter() - start
        mean = sum(r.score for r in results) / len(results)
        print(f"{name:<20} {len(results) / elapsed:>10.1f} {elapsed:>9.2f} {mean:>11.3f}", flush=True)
    server.shutdown()


if __name__ == "__main__":
    main()
