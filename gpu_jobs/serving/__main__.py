"""``python -m gpu_jobs.serving --model DIR --tier TIER --port PORT --served-name NAME``: one CPU replica.

Binds the port at once and answers ``/health`` with 503 while the model loads, then 200. Every request must
send ``Authorization: Bearer $ANNEAL_REPLICA_CREDENTIAL``: the credential comes from the environment (the serve
worker sets it), never from argv. Exits 2 on bad arguments (argparse), on a model folder that does not exist
and without a credential.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from gpu_jobs.serving.auth import CREDENTIAL_ENV, MIN_CREDENTIAL_CHARS
from gpu_jobs.serving.engine import TIERS, Engine, EngineConfig
from gpu_jobs.serving.engine.base import DEFAULT_PREFIX_CACHE_MB

GRACEFUL_SHUTDOWN_S = 10


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m gpu_jobs.serving", description=__doc__)
    parser.add_argument("--model", required=True, type=Path, help="a Hugging Face model folder")
    parser.add_argument("--tier", required=True, choices=TIERS)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", required=True, type=int)
    parser.add_argument("--served-name", required=True, help="the model name clients put in 'model'")
    parser.add_argument(
        "--max-concurrency",
        type=_positive,
        default=16,
        help="requests held at once (queued + running); more get HTTP 429",
    )
    parser.add_argument(
        "--max-model-len",
        type=_positive,
        default=None,
        help="context window in tokens (prompt + max_tokens); default: the model's max_position_embeddings",
    )
    parser.add_argument(
        "--prompt-lookup-tokens", type=_positive, default=32, help="turbo: most tokens proposed per step"
    )
    parser.add_argument(
        "--prompt-lookup-ngram",
        type=_positive,
        default=3,
        help="turbo: longest n-gram matched in the context",
    )
    parser.add_argument("--draft-model", type=Path, default=None, help="turbo: a draft model folder")
    parser.add_argument(
        "--max-batch", type=_positive, default=64, help="batch: most sequences decoding together"
    )
    parser.add_argument(
        "--prefix-cache-mb",
        type=_non_negative,
        default=DEFAULT_PREFIX_CACHE_MB,
        help="memory for the keys and values of shared prompt prefixes, reused across requests; 0: off",
    )
    parser.add_argument("--threads", type=_positive, default=None, help="torch intra-op threads")
    parser.add_argument("--log-level", default="warning")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if not (args.model / "config.json").is_file():
        print(f"error: {args.model} is not a model folder (no config.json)", file=sys.stderr)
        raise SystemExit(2)
    if args.draft_model is not None and args.tier != "turbo":
        print("error: --draft-model is for the turbo tier only", file=sys.stderr)
        raise SystemExit(2)
    # Taken out of the environment so nothing this process starts inherits it.
    credential = os.environ.pop(CREDENTIAL_ENV, "")
    if len(credential) < MIN_CREDENTIAL_CHARS:
        print(
            f"error: set {CREDENTIAL_ENV} to a random secret of at least {MIN_CREDENTIAL_CHARS} characters: "
            "the replica answers only requests that send it as 'Authorization: Bearer …'",
            file=sys.stderr,
        )
        raise SystemExit(2)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    import uvicorn

    from gpu_jobs.serving.server import create_app

    engine = Engine(
        args.model,
        EngineConfig(
            tier=args.tier,
            max_concurrency=args.max_concurrency,
            max_model_len=args.max_model_len,
            prompt_lookup_tokens=args.prompt_lookup_tokens,
            prompt_lookup_ngram=args.prompt_lookup_ngram,
            draft_model=args.draft_model,
            max_batch=args.max_batch,
            prefix_cache_bytes=args.prefix_cache_mb * 1024 * 1024,
        ),
    )
    app = create_app(engine, args.served_name, credential=credential)
    # On SIGTERM, requests still streaming get GRACEFUL_SHUTDOWN_S to finish, then the process exits.
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        access_log=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )


if __name__ == "__main__":
    main()
