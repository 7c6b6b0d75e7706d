"""Text normalisation shared by the comparing verifiers: case, whitespace, punctuation, Unicode forms."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Literal

UNICODE_FORMS = ("none", "NFC", "NFKC")
WHITESPACE_MODES = ("keep", "strip", "collapse")


@dataclass(frozen=True)
class Normaliser:
    """How two answers are made comparable. `collapse` strips the ends and turns inner runs into one space."""

    case_sensitive: bool = False
    whitespace: str = "collapse"
    ignore_punctuation: bool = False
    unicode_form: Literal["NFC", "NFD", "NFKC", "NFKD", "none"] = "NFKC"

    def __call__(self, text: str) -> str:
        if self.unicode_form != "none":
            # NFKC first: it turns full-width digits and ligatures into the plain characters the rest expects.
            text = unicodedata.normalize(self.unicode_form, text)
        if self.ignore_punctuation:
            # Unicode categories P* (punctuation); symbols such as $ or + stay, they can carry meaning.
            text = "".join(ch for ch in text if not unicodedata.category(ch).startswith("P"))
        if not self.case_sensitive:
            text = text.casefold()
        if self.unicode_form != "none" and (self.ignore_punctuation or not self.case_sensitive):
            # Dropping a mark between a letter and its accent, or case folding, can leave the text
            # un-normalised ("C" "." "\u0327" → "C\u0327"): normalise again so the result is a fixed point.
            text = unicodedata.normalize(self.unicode_form, text)
        if self.whitespace == "strip":
            text = text.strip()
        elif self.whitespace == "collapse":
            text = " ".join(text.split())
        return text


def normalise_fields() -> tuple:
    """The spec fields of a Normaliser, shared by exact_match, regex and keywords."""
    from gpu_jobs.rewards.base import SpecField

    return (
        SpecField("case_sensitive", (bool,), default=False, help="When false, 'Paris' equals 'paris'."),
        SpecField("strip_whitespace", (bool,), default=True, help="Ignore spaces and newlines at both ends."),
        SpecField(
            "collapse_whitespace",
            (bool,),
            default=False,
            help="Also treat any run of spaces, tabs and newlines inside as one space.",
        ),
        SpecField(
            "ignore_punctuation",
            (bool,),
            default=False,
            help="Drop punctuation (. , ! ? ; : quotes, brackets) before comparing.",
        ),
        SpecField(
            "unicode_form",
            (str,),
            default="NFKC",
            choices=UNICODE_FORMS,
            help="Unicode normalisation: NFKC makes full-width digits, ligatures and composed accents equal "
            "their plain forms; none compares code points as they are.",
        ),
    )


def normaliser_from_spec(spec: dict) -> Normaliser:
    if spec.get("collapse_whitespace"):
        whitespace = "collapse"
    else:
        whitespace = "strip" if spec.get("strip_whitespace", True) else "keep"
    return Normaliser(
        case_sensitive=spec.get("case_sensitive", False),
        whitespace=whitespace,
        ignore_punctuation=spec.get("ignore_punctuation", False),
        unicode_form=spec.get("unicode_form", "NFKC"),
    )
