"""render: the completion's SVG, rendered in a sandbox, against the row's reference SVG rendered the same way,
compared by structural similarity (SSIM) here, outside the sandbox.

Both pictures are rasterised by librsvg (`rsvg-convert`, the sandbox profile `render`) at the spec's size on
white, one file at a time: each SVG is written alone into a fresh folder, rendered and removed before the next
is written, so an answer cannot draw the reference (or a neighbour's answer) by linking to its file, and no
network or host file is reachable from the sandbox. The sandbox sends back PNGs, compared on grey levels by
SSIM (7x7 windows, the usual constants). A blank canvas already shares most of a drawing's background (its
SSIM with a few shapes on white is about 0.7), so the score is the way from a blank canvas to the reference:
(SSIM - SSIM of blank) / (1 - SSIM of blank), clipped to 0..1, and 0 when the SSIM is below `min_ssim`. Both
images travel with the result, as data URIs, for the rollout view.
"""

from __future__ import annotations

import base64
import io
import json
import re
import secrets

from gpu_jobs.rewards.base import Scorer, ScoreResult, SpecError, SpecField, shorten
from gpu_jobs.rewards.sandboxed import run_or_outage
from sandboxes.client import SandboxClient
from sandboxes.types import Limits, RunRequest, RunResult, Status

CHUNK = 8  # samples per sandbox run (each with its reference)
MAX_SVG_CHARS = 200_000
MAX_SIDE = 512
REPORT = "ANNEAL_RENDER "
_FENCED_SVG = re.compile(r"```(?:svg|xml)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)
_SVG_ELEMENT = re.compile(r"<svg\b.*?</svg\s*>", re.DOTALL | re.IGNORECASE)

# Runs in the sandbox (standard library and rsvg-convert): {"nonce", "width", "height", "svgs": [text]} on stdin;
# one line REPORT + {"nonce", "images": [{"png": base64 | None, "error": str | None}]}.
PROGRAM = r"""
import base64, json, os, shutil, subprocess, sys, tempfile
job = json.loads(sys.stdin.read())
images = []
for text in job["svgs"]:
    folder = tempfile.mkdtemp(dir="/tmp")
    try:
        with open(os.path.join(folder, "picture.svg"), "w", encoding="utf-8") as f:
            f.write(text)
        done = subprocess.run(
            ["/usr/bin/rsvg-convert", "-w", str(job["width"]), "-h", str(job["height"]), "-b", "white",
             "-o", os.path.join(folder, "picture.png"), os.path.join(folder, "picture.svg")],
            capture_output=True, timeout=job["timeout_s"], cwd=folder, env={"PATH": "/usr/bin:/bin"},
        )
        if done.returncode != 0:
            message = done.stderr.decode(errors="replace").strip().splitlines()
            images.append({"png": None, "error": (message[-1] if message else f"exit code {done.returncode}")[:300]})
        else:
            with open(os.path.join(folder, "picture.png"), "rb") as f:
                images.append({"png": base64.b64encode(f.read()).decode(), "error": None})
    except subprocess.TimeoutExpired:
        images.append({"png": None, "error": "rendering ran past its time limit"})
    finally:
        shutil.rmtree(folder, ignore_errors=True)
print("ANNEAL_RENDER " + json.dumps({"nonce": job["nonce"], "images": images}))
"""


def extract_svg(text: str) -> str | None:
    """The first ```svg (or ```xml, or untagged) block holding an <svg> element, else the first <svg> element
    of the text; None when there is none."""
    for block in _FENCED_SVG.findall(text):
        found = _SVG_ELEMENT.search(block)
        if found:
            return found.group(0)
    found = _SVG_ELEMENT.search(text)
    return found.group(0) if found else None


def ssim(first, second) -> float:
    """Mean structural similarity of two grey images (2-D float arrays of one shape, 0..255), 7x7 windows."""
    import numpy as np

    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2

    def windows(image):
        view = np.lib.stride_tricks.sliding_window_view(image, (7, 7))
        return view.mean(axis=(-1, -2))

    x, y = first.astype(np.float64), second.astype(np.float64)
    mx, my = windows(x), windows(y)
    vx, vy = windows(x * x) - mx * mx, windows(y * y) - my * my
    cov = windows(x * y) - mx * my
    value = ((2 * mx * my + c1) * (2 * cov + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
    return float(value.mean())


def _grey(png: bytes):
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        return np.asarray(image.convert("L"), dtype=np.float64)


class Render(Scorer):
    type_name = "render"
    slow = True
    summary = "Render: the answer's SVG rendered in a sandbox and compared with the reference's by SSIM"
    example = {"type": "render", "reference_field": "svg", "width": 64, "height": 64}
    fields = (
        SpecField(
            "reference_field", (str,), default="svg", help="The column holding each row's reference SVG."
        ),
        SpecField(
            "width",
            (int,),
            default=64,
            help=f"Width both pictures are rendered at, in pixels (8 to {MAX_SIDE}).",
        ),
        SpecField("height", (int,), default=64, help=f"Height both are rendered at (8 to {MAX_SIDE})."),
        SpecField(
            "min_ssim",
            (int, float),
            default=0.0,
            help="Below this structural similarity the score is 0 (0..1); above it, the similarity itself.",
        ),
        SpecField("timeout_s", (int, float), default=5, help="For rendering each picture (max 30)."),
    )

    def __init__(self, spec: dict, *, sandbox: SandboxClient | None = None) -> None:
        super().__init__(spec)
        self._sandbox = sandbox

    @classmethod
    def normalise_spec(cls, spec: dict) -> dict:
        clean = super().normalise_spec(spec)
        for side in ("width", "height"):
            if not 8 <= clean[side] <= MAX_SIDE:
                raise SpecError(side, f"must be between 8 and {MAX_SIDE} pixels")
        if not 0 <= clean["min_ssim"] <= 1:
            raise SpecError("min_ssim", "must be between 0 and 1")
        if not 0 < clean["timeout_s"] <= 30:
            raise SpecError("timeout_s", "must be more than 0 and at most 30 seconds")
        return clean

    def score(self, row: dict, completion: str) -> ScoreResult:
        return self.score_batch([row], [completion])[0]

    def score_batch(self, rows: list[dict], completions: list[str]) -> list[ScoreResult]:
        if len(rows) != len(completions):
            raise ValueError(f"{len(rows)} rows but {len(completions)} completions")
        results: list[ScoreResult | None] = [None] * len(rows)
        todo: list[tuple[int, str, str]] = []
        field = self.spec["reference_field"]
        for index, (row, completion) in enumerate(zip(rows, completions, strict=True)):
            reference = row.get(field) if isinstance(row, dict) else None
            answer = extract_svg(completion) if isinstance(completion, str) else None
            if not isinstance(reference, str) or extract_svg(reference) is None:
                results[index] = _zero(f"row has no {field!r} SVG to compare with")
            elif answer is None:
                results[index] = _zero("no <svg> element in the answer")
            elif len(answer) > MAX_SVG_CHARS:
                results[index] = _zero(f"the answer's SVG is longer than {MAX_SVG_CHARS:,} characters")
            else:
                todo.append((index, answer, reference))
        chunks = [todo[start : start + CHUNK] for start in range(0, len(todo), CHUNK)]
        nonces = [secrets.token_hex(16) for _ in chunks]
        requests = [self._request(chunk, nonce) for chunk, nonce in zip(chunks, nonces, strict=True)]
        for chunk, nonce, run in zip(chunks, nonces, run_or_outage(self._client(), requests), strict=True):
            images = _report(run, nonce)
            for position, (index, _, _) in enumerate(chunk):
                if images is None:
                    results[index] = _zero(_why_no_report(run))
                    continue
                results[index] = self._compare(images[2 * position], images[2 * position + 1])
        return [result for result in results if result is not None]  # every index is filled above

    def _client(self) -> SandboxClient:
        if self._sandbox is None:
            self._sandbox = SandboxClient()
        return self._sandbox

    def _request(self, chunk: list[tuple[int, str, str]], nonce: str) -> RunRequest:
        svgs = [svg for _, answer, reference in chunk for svg in (answer, reference)]
        job = {"nonce": nonce, "width": self.spec["width"], "height": self.spec["height"], "svgs": svgs,
               "timeout_s": float(self.spec["timeout_s"])}  # fmt: skip
        limit = float(self.spec["timeout_s"]) * len(svgs) + 2
        pixels = self.spec["width"] * self.spec["height"]
        output = 65_536 + len(svgs) * (pixels * 6 + 4096)  # base64 PNGs, worst case uncompressed
        return RunRequest(
            language="python",
            code=PROGRAM,
            stdin=json.dumps(job),
            limits=Limits(wall_s=limit, cpu_s=limit, memory_mb=512, output_bytes=output),
            profile="render",
        )

    def _compare(self, answer: dict, reference: dict) -> ScoreResult:
        if reference.get("png") is None:
            return _zero(f"the reference SVG did not render: {reference.get('error')}")
        if answer.get("png") is None:
            return _zero(f"the answer's SVG did not render: {shorten(str(answer.get('error')), 200)}")
        try:
            target = _grey(base64.b64decode(reference["png"]))
            value = ssim(_grey(base64.b64decode(answer["png"])), target)
        except Exception as exc:  # noqa: BLE001 - a PNG that does not decode is the answer's failure
            return _zero(f"the rendered answer could not be read: {type(exc).__name__}")
        # A blank canvas already shares the reference's background: the score is the way from it to the
        # reference, so drawing nothing earns nothing.
        blank = ssim(target * 0 + 255, target)
        if blank >= 1 - 1e-9:
            score = 1.0 if value >= 1 - 1e-6 else 0.0
        else:
            score = max(0.0, min(1.0, (value - blank) / (1 - blank)))
        if value < self.spec["min_ssim"]:
            score = 0.0
        parts = {"ssim": value, "blank_ssim": blank}
        reason = f"structural similarity {value:.3f} (a blank canvas: {blank:.3f})"
        result = ScoreResult(score, parts, reason)
        result.output = {
            "status": "ok",
            "stdout": "",
            "stderr": "",
            "answer_png": "data:image/png;base64," + answer["png"],
            "reference_png": "data:image/png;base64," + reference["png"],
        }
        return result


def _report(run: RunResult, nonce: str) -> list[dict] | None:
    for line in reversed(run.stdout.splitlines()):
        if line.startswith(REPORT):
            try:
                report = json.loads(line[len(REPORT) :])
            except ValueError:
                return None
            if (
                isinstance(report, dict)
                and report.get("nonce") == nonce
                and isinstance(report.get("images"), list)
            ):
                return report["images"]
    return None


def _why_no_report(run: RunResult) -> str:
    tail = shorten(run.stderr.strip().splitlines()[-1], 200) if run.stderr.strip() else ""
    if run.status == Status.SANDBOX_ERROR:
        return f"sandbox error: {tail}"
    return f"the renderer gave no report ({run.status}) {tail}".strip()


def _zero(reason: str) -> ScoreResult:
    return ScoreResult(0.0, {"ssim": 0.0, "blank_ssim": 0.0}, reason)
