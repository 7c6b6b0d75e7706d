"""similarity: BLEU, ROUGE-L or chrF between the answer and the row's reference text, scaled to 0..1."""

from __future__ import annotations

from gpu_jobs.rewards.base import Scorer, ScoreResult, SpecError, SpecField
from gpu_jobs.rewards.exact_match import references_in
from gpu_jobs.rewards.extract import check_extract_fields, extract_fields, extract_from_spec

METRICS = ("bleu", "rouge_l", "chrf")
# Token lists longer than this make the LCS table too slow for a reward (n² steps); longer texts are cut.
MAX_LCS_TOKENS = 1000
# sacreBLEU's n-gram counts grow with the text: a runaway completion is cut before scoring.
MAX_CHARS = 20000


def rouge_l_f1(candidate: str, reference: str) -> float:
    """ROUGE-L F1 over lower-cased whitespace tokens: the longest common subsequence's precision and recall."""
    cand = candidate.lower().split()[:MAX_LCS_TOKENS]
    ref = reference.lower().split()[:MAX_LCS_TOKENS]
    if not cand or not ref:
        return 0.0
    # One row of the LCS table at a time: O(len(ref)) memory.
    previous = [0] * (len(ref) + 1)
    for token in cand:
        current = [0]
        for j, ref_token in enumerate(ref, start=1):
            current.append(previous[j - 1] + 1 if token == ref_token else max(previous[j], current[j - 1]))
        previous = current
    lcs = previous[-1]
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(cand), lcs / len(ref)
    return 2 * precision * recall / (precision + recall)


def similarity(metric: str, candidate: str, references: list[str]) -> float:
    """The metric in 0..1 against the best of several references."""
    import sacrebleu

    if metric == "bleu":
        return sacrebleu.sentence_bleu(candidate, references).score / 100.0
    if metric == "chrf":
        return sacrebleu.sentence_chrf(candidate, references).score / 100.0
    return max(rouge_l_f1(candidate, reference) for reference in references)


class TextSimilarity(Scorer):
    type_name = "similarity"
    summary = "Text similarity: BLEU, ROUGE-L or chrF against a reference text (0..1)"
    example = {"type": "similarity", "metric": "chrf", "reference_field": "answer"}
    fields = (
        SpecField(
            "metric",
            (str,),
            default="rouge_l",
            choices=METRICS,
            help="bleu: n-gram precision (sacreBLEU); rouge_l: longest common word sequence; chrf: character n-grams.",
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
        value = min(1.0, max(0.0, similarity(self.spec["metric"], text[:MAX_CHARS], references)))
        score = value if value >= self.spec["min_score"] else 0.0
        return ScoreResult(score, {self.spec["metric"]: value}, f"{self.spec['metric']} {value:.3f}")
