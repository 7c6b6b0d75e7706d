"""Reads for verifiers: version diffs, probe flags and the spec catalogue the form builder is generated from."""

import difflib
import json

from anneal.verifiers.models import VerifierVersion
from gpu_jobs.rewards import VERIFIER_TYPES


def verifier_version_diff(*, version: VerifierVersion) -> str:
    """A unified diff of this version's spec against the previous version's ('' for version 1)."""
    previous = (
        VerifierVersion.objects.filter(verifier_id=version.verifier_id, number__lt=version.number)
        .order_by("-number")
        .first()
    )
    if previous is None:
        return ""
    before = json.dumps(previous.spec, indent=2, sort_keys=True).splitlines()
    after = json.dumps(version.spec, indent=2, sort_keys=True).splitlines()
    return "\n".join(
        difflib.unified_diff(before, after, f"v{previous.number}", f"v{version.number}", lineterm="", n=2)
    )


def verifier_type_catalogue() -> list[dict]:
    """Every verifier type with its summary, example and fields (help, default, choices), for the builder."""
    return [
        {
            "type": name,
            "summary": cls.summary,
            "example": cls.example,
            "fields": [field.describe() for field in cls.fields],
        }
        for name, cls in VERIFIER_TYPES.items()
    ]
