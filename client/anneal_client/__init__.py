"""The Anneal platform's Python client: ``from anneal_client import Anneal, AsyncAnneal``.

Named ``anneal_client`` because ``anneal`` is the platform's own Django project: two top-level modules of
one name would shadow each other wherever both are installed.
"""

__version__ = "0.1.0"

from anneal_client._client import Anneal, AsyncAnneal  # noqa: E402
from anneal_client._errors import (  # noqa: E402
    AnnealError,
    APIConnectionError,
    APIError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    RequestTooLargeError,
    SpecFileError,
    UnprocessableEntityError,
)
from anneal_client.resources._base import WaitTimeout  # noqa: E402

__all__ = [
    "Anneal",
    "AsyncAnneal",
    "AnnealError",
    "APIConnectionError",
    "APIError",
    "APIStatusError",
    "APITimeoutError",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "InternalServerError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitError",
    "RequestTooLargeError",
    "SpecFileError",
    "UnprocessableEntityError",
    "WaitTimeout",
]
