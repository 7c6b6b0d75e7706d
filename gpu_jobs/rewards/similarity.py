"""similarity: BLEU, ROUGE-1..5, ROUGE-L, chrF or a fuzzy match between the answer and the row's reference text,
scaled to 0..1.

fuzzy_match and the ROUGE-N metrics are the ones OpenAI's text_similarity grader names (rapidfuzz's ratio; ROUGE
as the rouge-score package computes it, with tokenize=rouge_score), so an imported grader scores the same here.
"""

from __future__ import annotations

import re
from collections import Counter

from gpu_jobs.rewards.base import Scorer, ScoreResult, SpecError, SpecField
from gpu_jobs.rewards.exact_match import references_in
from gpu_jobs.rewards.extract import check_extract_fields, extract_fields, extract_from_spec

METRICS = ("bleu", "rouge_l", "chrf", "fuzzy_match", "rouge_1", "rouge_2", "rouge_3", "rouge_4", "rouge_5")
TOKENIZERS = ("whitespace", "rouge_score")
# rouge-score's tokenizer: lower case, anything but a-z and 0-9 separates tokens (accented letters included).
_NOT_ALPHANUMERIC = re.compile(r"[^a-z0-9]+")
# Token lists longer than this make the LCS table too slow for a reward (n² steps); longer texts are cut.
MAX_LCS_TOKENS = 1000
# sacreBLEU's n-gram counts grow with the text: a runaway completion is cut before scoring.
MAX_CHARS = 20000


def tokens(text: str, tokenize: str = "whitespace") -> list[str]:
    """Lower-cased tokens: split at whitespace, or as rouge-score does (letters a-z and digits only)."""
    if tokenize == "rouge_score":
        return _NOT_ALPHANUMERIC.sub(" ", text.lower()).split()
    return text.lower().split()


def _f1(overlap: int, candidate_count: int, reference_count: int) -> float:
    if overlap == 0:
        return 0.0
    precision, recall = overlap / candidate_count, overlap / reference_count
    return 2 * precision * recall / (precision + recall)


def rouge_n_f1(candidate: str, reference: str, n: int, tokenize: str = "whitespace") -> float:
    """ROUGE-N F1: the n-grams the two share (clipped counts) over each side's n-gram count."""
    cand, ref = tokens(candidate, tokenize), tokens(reference, tokenize)
    cand_grams = Counter(tuple(cand[i : i + n]) for i in range(len(cand) - n + 1))
    ref_grams = Counter(tuple(ref[i : i + n]) for i in range(len(ref) - n + 1))
    if not cand_grams or not ref_grams:
        return 0.0
    overlap = sum((cand_grams & ref_grams).values())
    return _f1(overlap, sum(cand_grams.values()), sum(ref_grams.values()))


def fuzzy_ratio(candidate: str, reference: str) -> float:
    """rapidfuzz's ratio (normalised Indel similarity: 2 x common characters in order / both lengths), 0..1."""
    from rapidfuzz import fuzz

    return fuzz.ratio(candidate, reference) / 100.0


def rouge_l_f1(candidate: str, reference: str, tokenize: str = "whitespace") -> float:
    """ROUGE-L F1 over lower-cased tokens: the longest common subsequence's precision and recall."""
    cand = tokens(candidate, tokenize)[:MAX_LCS_TOKENS]
    ref = tokens(reference, tokenize)[:MAX_LCS_TOKENS]
    if not cand or not ref:
        return 0.0
    # One row of the LCS table at a time: O(len(ref)) memory.
    previous = [0] * (len(ref) + 1)
    for token in cand:
        current = [0]
        for j, ref_token in enumerate(ref, start=1):
            current.append(previous[j - 1] + 1 if token == ref_token else max(previous[j], current[j - 1]))
        previous = current
    return _f1(previous[-1], len(cand), len(ref))


def similarity(metric: str, candidate: str, references: list[str], tokenize: str = "whitespace") -> float:
    """The metric in 0..1 against the best of several references."""
    import sacrebleu

    if metric == "bleu":
        return sacrebleu.sentence_bleu(candidate, references).score / 100.0
    if metric == "chrf":
        return sacrebleu.sentence_chrf(candidate, references).score / 100.0
    if metric == "fuzzy_match":
        return max(fuzzy_ratio(candidate, reference) for reference in references)
    if metric.startswith("rouge_") and metric[-1].isdigit():
        n = int(metric[-1])
        return max(rouge_n_f1(candidate, reference, n, tokenize) for reference in references)
    return max(rouge_l_f1(candidate, reference, tokenize) for reference in references)


class TextSimilarity(Scorer):
    type_name = "similarity"
    summary = "Text similarity: BLEU, ROUGE, chrF or a fuzzy match against a reference text (0..1)"
    example = {"type": "similarity", "metric": "chrf", "reference_field": "answer"}
    fields = (
        SpecField(
            "metric",
            (str,),
            default="rouge_l",
            choices=METRICS,
            help="bleu: n-gram precision (sacreBLEU); rouge_l: longest common word sequence; chrf: character "
            "n-grams; fuzzy_match: characters in common, in order (rapidfuzz ratio); rouge_1..rouge_5: word "
            "n-grams in common (F1).",
        ),
        SpecField(
            "tokenize",
            (str,),
            default="whitespace",
            choices=TOKENIZERS,
            help="Words for the ROUGE metrics: whitespace splits at spaces; rouge_score keeps only letters a-z "
            "and digits, as the rouge-score package does (what OpenAI's text_similarity grader uses).",
        ),
        SpecField("reference_field", (str,), default="answer", help="The column with the reference text."),
        SpecField(
            "min_score", (int, float), default=0, help="Scores below this count as 0 (a floor against noise)."
        ),
        *extract_fields(),
    )

    @classmethod
    def normalise_spec(cls, spec: dict) -> dict:
        clean = super().normalise_spec(spec)
        check_extract_fields(clean)
        if not 0 <= clean["min_score"] <= 1:
            raise SpecError("min_score", "must be between 0 and 1")
        return clean

    def _score(self, row: dict, completion: str) -> ScoreResult:
        field = self.spec["reference_field"]
        references = references_in(row, field)
        if references is None:
            return ScoreResult(0.0, {self.spec["metric"]: 0.0}, f"row has no {field!r} value to compare with")
        text = extract_from_spec(completion, self.spec)
        if text is None or not text.strip():
            return ScoreResult(0.0, {self.spec["metric"]: 0.0}, "empty answer")
        measured = similarity(self.spec["metric"], text[:MAX_CHARS], references, self.spec["tokenize"])
        value = min(1.0, max(0.0, measured))
        score = value if value >= self.spec["min_score"] else 0.0
        return ScoreResult(score, {self.spec["metric"]: value}, f"{self.spec['metric']} {value:.3f}")
