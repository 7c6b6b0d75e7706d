"""The engine a serving process runs: loads the model, bounds the requests held, feeds one worker thread."""

from __future__ import annotations

import logging
import queue
import threading
from pathlib import Path
from typing import Any

from gpu_jobs.serving.engine.base import TIERS, EngineConfig
from gpu_jobs.serving.engine.events import Job
from gpu_jobs.serving.protocol import ApiError

logger = logging.getLogger(__name__)


class Engine:
    """Loads a model folder and serves generation jobs from one worker thread."""

    def __init__(self, model_dir: Path, config: EngineConfig) -> None:
        if config.tier not in TIERS:
            raise ValueError(f"tier must be one of {TIERS}, got {config.tier!r}")
        self.model_dir = Path(model_dir)
        self.config = config
        self.model: Any = None
        self.assistant: Any = None  # turbo's draft model, when one is configured
        self.tokenizer: Any = None
        self.context_len = 0
        self.eos_ids: set[int] = set()
        self.pad_id = 0
        self.prefix_cache: Any = None  # prefix.PrefixCache once loaded, unless prefix caching is off
        self.model_key = str(self.model_dir.resolve())
        self.ready = threading.Event()
        self.load_error: str | None = None
        # The worker's input: jobs in arrival order, then None to stop.
        self.jobs: queue.Queue[Job | None] = queue.Queue()
        self._held = 0
        self._held_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> None:
        """Load the model and run the worker, both on a background thread (health says 503 until ready)."""
        self._thread = threading.Thread(target=self._main, name=f"engine-{self.config.tier}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.jobs.put(None)

    def _main(self) -> None:
        try:
            self.load()
        except Exception as error:  # noqa: BLE001 - reported on /health, the process keeps answering
            logger.exception("could not load %s", self.model_dir)
            self.load_error = f"{type(error).__name__}: {error}"
            return
        self.ready.set()
        # A tier's module imports torch: loaded here, so that importing the engine does not.
        if self.config.tier == "batch":
            from gpu_jobs.serving.engine.batch import serve
        else:
            from gpu_jobs.serving.engine.sequential import serve
        serve(self)

    def load(self) -> None:
        """Load tokenizer and model (float32, inference only); called by the worker thread, or by a test."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        # Weights that need no gradient, rather than torch.set_grad_enabled(False): that is the calling
        # thread's state, and a test (or any caller) loading in its own thread would keep it afterwards.
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=torch.float32).eval()
        self.model.requires_grad_(False)
        if self.config.draft_model is not None:
            self.assistant = AutoModelForCausalLM.from_pretrained(
                self.config.draft_model, dtype=torch.float32
            ).eval()
            self.assistant.requires_grad_(False)
        limit = int(getattr(self.model.config, "max_position_embeddings", 0) or 2048)
        if self.config.max_model_len:
            limit = min(limit, self.config.max_model_len)
        self.context_len = limit
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        self.eos_ids = {eos} if isinstance(eos, int) else set(eos or ())
        if self.tokenizer.eos_token_id is not None:
            self.eos_ids.add(self.tokenizer.eos_token_id)
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else next(iter(self.eos_ids), 0)
        # Assisted generation (turbo with a draft model) cannot start from a partly filled cache.
        if self.config.prefix_cache_bytes > 0 and self.assistant is None:
            from gpu_jobs.serving.engine.prefix import PrefixCache

            self.prefix_cache = PrefixCache(self.config.prefix_cache_bytes)

    # -- admission -------------------------------------------------------------------------------------
    def admit(self) -> None:
        """Hold a slot for one request or raise a 429 ApiError; pair with ``release``."""
        with self._held_lock:
            if self._held >= self.config.max_concurrency:
                raise ApiError(
                    f"this deployment is at its maximum concurrency ({self.config.max_concurrency} requests "
                    "at once); retry shortly",
                    status=429,
                    type="rate_limit_error",
                    code="rate_limit_exceeded",
                )
            self._held += 1

    def release(self) -> None:
        with self._held_lock:
            self._held = max(0, self._held - 1)

    @property
    def held(self) -> int:
        return self._held

    def submit(self, job: Job) -> None:
        self.jobs.put(job)
