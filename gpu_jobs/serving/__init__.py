"""Serving engines for deployments: one OpenAI-compatible ``/v1`` surface on every host.

- CPU: ``python -m gpu_jobs.serving --model DIR --tier {standard,turbo,batch} --port PORT --served-name NAME``
  runs transformers behind Starlette/uvicorn (``gpu_jobs.serving.server``, ``gpu_jobs.serving.engine``).
- GPU: ``vllm_serve_argv(...)`` returns the command line of vLLM's OpenAI server for the same model and tier.

Django-free. Importing this package does not import torch; the CPU engine loads it when it starts.
"""

from gpu_jobs.serving.engine import TIERS
from gpu_jobs.serving.vllm import vllm_serve_argv

__all__ = ["TIERS", "vllm_serve_argv"]
