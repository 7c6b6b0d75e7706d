"""Long-context task packs: offline generators after RULER's task families, each with its verifier.

Families (``FAMILIES``; a family is also its rows' domain): needle retrieval with one needle and with
several (``niah_single``, ``niah_multikey``, ``niah_multivalue``, ``niah_multiquery``), ``kv_lookup``,
``variable_tracking``, ``common_words``, aggregation over a long table (``table_aggregate``) and
question answering over a whole repository (``repo_qa``). A length setting from 256 to 131,072 tokens
sizes each prompt; tokens are counted by a function the caller passes (default: the tiny model's, one
per byte). Django-free and torch-free: the web process makes packs (anneal.datasets.pack_services) and
the tiny long-context model's warm-up (gpu_jobs.tiny_long_model) uses the same rows.
"""

from gpu_jobs.long_context.families import (
    FAMILIES,
    MAX_LENGTH,
    MIN_LENGTH,
    STANDARD_LENGTHS,
    Family,
    LengthError,
    RequestError,
    check_request,
    family_row,
    generate_rows,
)
from gpu_jobs.long_context.text import byte_count

__all__ = [
    "FAMILIES",
    "MAX_LENGTH",
    "MIN_LENGTH",
    "STANDARD_LENGTHS",
    "Family",
    "LengthError",
    "RequestError",
    "byte_count",
    "check_request",
    "family_row",
    "generate_rows",
]
