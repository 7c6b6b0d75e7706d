"""The repo_tests environment: a task row's repository in a persistent sandbox session, tools, final verdict.

A row (see gpu_jobs.agent.taskpack) holds ``prompt``, ``files`` (relative path -> text, the repository) and
``test_files`` (which of those are the task's unittest modules). The verifier of the final state writes the
original test files back (editing a test earns nothing), runs them, and scores the share of the task's tests
that pass; the number of tests is counted from the original files, so a module that no longer imports counts
all its tests as failed.
"""

from __future__ import annotations

import ast
import json
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from gpu_jobs.agent.spec import EnvironmentSpec, RowError, check_row
from gpu_jobs.agent.tools import ToolCall
from gpu_jobs.rewards import code_judge
from sandboxes.session import SandboxSession, SessionPool
from sandboxes.types import Limits, RunResult, Status

_HERE = Path(__file__).parent
RUNNER_SOURCE = (_HERE / "unittest_runner.py").read_text(encoding="utf-8")
PATCH_SOURCE = (_HERE / "patching.py").read_text(encoding="utf-8")
REPLACE_SOURCE = (_HERE / "replacing.py").read_text(encoding="utf-8")
TOOL_OUTPUT_BYTES = 65536  # what the sandbox keeps of one call's output; the episode cuts it much shorter
READ_FILE = "import json, sys\nwith open(json.load(sys.stdin)['path'], encoding='utf-8') as f:\n    print(f.read(), end='')\n"
WRITE_FILE = (
    "import json, os, sys\nargs = json.load(sys.stdin)\nfolder = os.path.dirname(args['path'])\n"
    "if folder:\n    os.makedirs(folder, exist_ok=True)\n"
    "with open(args['path'], 'w', encoding='utf-8') as f:\n    f.write(args['content'])\n"
    "print(f\"wrote {len(args['content'])} characters to {args['path']}\")\n"
)


# Run before the verdict with the original files of the test folders written back: removes every other Python
# file (and byte-code cache) under those folders, so nothing the model added there is imported by the tests.
CLEAN_TEST_FOLDERS = (
    "import json, os, shutil, sys\nargs = json.load(sys.stdin)\nkeep = set(args['keep'])\n"
    "for folder in args['folders']:\n"
    "    for root, dirs, names in os.walk(folder or '.'):\n"
    "        for name in names:\n"
    "            path = os.path.normpath(os.path.join(root, name))\n"
    "            if (name.endswith(('.py', '.pyc', '.pth')) and path not in keep) or os.path.islink(path):\n"
    "                os.unlink(path)\n"
    "        if '__pycache__' in dirs:\n"
    "            shutil.rmtree(os.path.join(root, '__pycache__'))\n"
)


def _inside(name: str, folders: list[str]) -> bool:
    parent = str(PurePosixPath(name).parent)
    return any(
        parent == folder or parent.startswith(folder + "/") for folder in folders if folder != "."
    ) or ("." in folders and parent == ".")


@dataclass
class Observation:
    text: str
    status: str  # the sandbox status ("ok", "failed", "timeout", ...), or "error" for a refused call
    seconds: float = 0.0


@dataclass
class Verdict:
    passed: int
    total: int
    output: str
    reason: str
    seconds: float = 0.0
    passed_ids: list[str] = field(default_factory=list)
    tampering: bool = False  # the repository's code reached for the grader: scored 0, and a job alarm

    @property
    def share(self) -> float:
        return self.passed / self.total if self.total else 0.0


def test_ids(path: str, source: str) -> set[str]:
    """The ids ("tests.test_x.Case.test_y") of the test* methods of the classes in a unittest module: what the
    loader collects from it. Only these count as passed, so tests a patched module adds at run time do not."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    module = path[:-3].replace("/", ".")
    return {
        f"{module}.{node.name}.{item.name}"
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        for item in node.body
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name.startswith("test")
    }


class RepoEnvironment:
    def __init__(
        self,
        row: dict,
        spec: EnvironmentSpec,
        *,
        backend: object | None = None,
        pool: SessionPool | None = None,
    ) -> None:
        """Starts the episode's sandbox with the row's files (on a pre-started one from `pool` when given).
        RowError for a bad row; SandboxStartError when the sandbox does not start."""
        self.files, self.test_files = check_row(row)
        self.spec = spec
        self.expected_ids = set().union(*(test_ids(name, self.files[name]) for name in self.test_files))
        self.total_tests = len(self.expected_ids)
        if self.total_tests == 0:
            raise RowError("test_files: no unittest test methods found in them")
        self.limits = Limits(
            wall_s=spec.tool_timeout_s, cpu_s=spec.tool_timeout_s, output_bytes=TOOL_OUTPUT_BYTES
        )
        if pool is not None and pool.tmpfs_mb == spec.tmpfs_mb:
            self.session = pool.session(files=self.files, limits=self.limits)
        else:
            self.session = SandboxSession(
                files=self.files, tmpfs_mb=spec.tmpfs_mb, limits=self.limits, backend=backend
            )

    def execute(self, call: ToolCall) -> Observation:
        """Run one tool call; its output as the model will see it (before truncation). Never raises."""
        started = time.monotonic()
        args = call.arguments
        if call.name in ("read_file", "write_file", "replace_text"):
            path = PurePosixPath(args["path"])
            if not args["path"] or path.is_absolute() or ".." in path.parts:
                return Observation(f"{call.name}: path must be relative, inside the repository", "error")
        if call.name == "run_shell":
            result = self.session.run("shell", args["command"])
        elif call.name == "run_python":
            result = self.session.run("python", args["code"])
        elif call.name == "read_file":
            result = self.session.run("python", READ_FILE, stdin=json.dumps({"path": args["path"]}))
        elif call.name == "write_file":
            result = self.session.run("python", WRITE_FILE, stdin=json.dumps(args))
        elif call.name == "replace_text":
            result = self.session.run("python", REPLACE_SOURCE, stdin=json.dumps(args))
        elif call.name == "apply_patch":
            result = self.session.run("python", PATCH_SOURCE, stdin=args["diff"])
        elif call.name == "run_tests":
            result = self.session.run("python", RUNNER_SOURCE, stdin=json.dumps({"files": self.test_files}))
        else:  # finish: the episode loop ends the episode; nothing runs
            return Observation("episode finished", "ok")
        return Observation(render_run(result), str(result.status), time.monotonic() - started)

    def verify(self) -> Verdict:
        """The share of the task's tests passing on the final state, judged by code_judge (the repository's
        code never runs in the process that decides). Before the run, every original file of the test
        folders is written back and any other Python file there removed, so that neither an edited test nor
        a planted tests/__init__.py or helper counts."""
        started = time.monotonic()
        if not self.session.alive:
            return Verdict(0, self.total_tests, "", "the sandbox was lost", 0.0)
        folders = sorted({str(PurePosixPath(name).parent) for name in self.test_files})
        originals = {name: text for name, text in self.files.items() if _inside(name, folders)}
        restore = self.session.run(
            "python", CLEAN_TEST_FOLDERS, stdin=json.dumps({"folders": folders, "keep": sorted(originals)}),
            files=originals,
        )  # fmt: skip
        if restore.status != Status.OK:
            reason = f"could not restore the test files: {restore.stderr.strip()[-200:]}"
            return Verdict(0, self.total_tests, "", reason, time.monotonic() - started)
        nonce = secrets.token_hex(16)
        time_s = self.limits.wall_s
        run = self.session.run(
            "python",
            code_judge.BOOT_SOURCE,
            stdin=code_judge.stdin(
                {"nonce": nonce, "mode": "unittest", "files": self.test_files}, time_s=time_s
            ),
            limits=Limits(
                wall_s=time_s + code_judge.SANDBOX_EXTRA_S,
                cpu_s=time_s + code_judge.SANDBOX_EXTRA_S,
                output_bytes=TOOL_OUTPUT_BYTES,
            ),
        )
        report = code_judge.find_report(run.stdout, nonce)
        output = render_run(run, hide_report=True)
        if report is None:
            why = f"the tests did not report ({run.status}): {run.stderr.strip()[-200:]}"
            return Verdict(0, self.total_tests, output, why, time.monotonic() - started)
        if report.get("tampering"):
            what = "; ".join(str(item) for item in report["tampering"])
            return Verdict(0, self.total_tests, output, f"tampering: {what}"[:300], time.monotonic() - started,
                           tampering=True)  # fmt: skip
        passed_ids = sorted({str(test_id) for test_id in report.get("passed", [])} & self.expected_ids)
        passed = len(passed_ids)
        reason = report.get("error") or f"{passed}/{self.total_tests} tests pass"
        return Verdict(passed, self.total_tests, output, reason, time.monotonic() - started, passed_ids)

    def close(self) -> None:
        self.session.close()


def render_run(result: RunResult, *, hide_report: bool = False) -> str:
    """A run as the model reads it: stdout, stderr, and the exit status when it is not a plain success."""
    stdout = result.stdout
    if hide_report:
        stdout = "\n".join(
            line for line in stdout.splitlines() if not line.startswith(code_judge.REPORT_PREFIX)
        )
    parts = [stdout.rstrip("\n")] if stdout.strip() else []
    if result.stderr.strip():
        parts.append(result.stderr.rstrip("\n"))
    if result.status != Status.OK:
        parts.append(f"[{result.status}, exit code {result.exit_code}]")
    elif not parts:
        parts.append("[no output, exit code 0]")
    return "\n".join(parts)
