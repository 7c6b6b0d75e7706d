"""Django-free, torch-free sandboxes: run untrusted programs through a named backend.

Use `SandboxClient` (local or through the "sandbox" Celery queue); backends live in `sandboxes.backends`.
"""

from sandboxes.client import SandboxClient
from sandboxes.types import Limits, RunRequest, RunResult, Status

__all__ = ["Limits", "RunRequest", "RunResult", "SandboxClient", "Status"]
