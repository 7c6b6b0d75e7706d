"""Long-context generators: deterministic, within their length setting, and their reference answers right by an
independent reading of the prompt (the program run, the table summed, the words counted, the repository read),
scoring 1 with the family's verifier while a wrong answer scores 0."""

import json
import re
from collections import Counter

import pytest

from gpu_jobs.long_context import (
    FAMILIES,
    MAX_LENGTH,
    RequestError,
    check_request,
    family_row,
    generate_rows,
)
from gpu_jobs.rewards import build_scorer
from gpu_jobs.tiny_model import build_char_tokenizer

# A prompt never exceeds its length and falls short by less than one filler line.
SHORTFALL = 40


def _row(family: str, length: int, seed: int = 0, index: int = 0, **kwargs) -> dict:
    # Through JSON, as a dataset version stores it.
    return json.loads(json.dumps(family_row(family=family, length=length, seed=seed, index=index, **kwargs)))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_fits_its_lengths_and_its_reference_alone_scores(family):
    scorer = build_scorer(FAMILIES[family].spec)
    for length in sorted({FAMILIES[family].min_length, 1024, 8192}):
        for index in range(3):
            row = _row(family, length, index=index)
            assert row["domain"] == family and row["length_bucket"] == length
            assert row["prompt_tokens"] == len(row["prompt"].encode())
            assert length - SHORTFALL <= row["prompt_tokens"] <= length, (length, row["prompt_tokens"])
            assert row["prompt"].isascii() and row["prompt"].endswith("answer:")
            assert scorer.score(row, row["answer"]).score == 1.0
            assert scorer.score(row, " " + row["answer"] + "\n").score == 1.0
            assert scorer.score(row, "i do not know").score == 0.0
            if row.get("answers"):
                # Half the items is half the credit: the fraction a policy can climb.
                half = row["answers"][: len(row["answers"]) // 2]
                assert 0.0 < scorer.score(row, ", ".join(half)).score < 1.0


def test_rows_are_a_function_of_family_length_seed_and_index():
    first = generate_rows(families=["niah_single", "table_aggregate"], lengths=[512, 256], size=3, seed=5)
    again = generate_rows(families=["niah_single", "table_aggregate"], lengths=[256, 512], size=3, seed=5)
    assert first == again
    assert [(r["domain"], r["length_bucket"]) for r in first[:4]] == [
        ("niah_single", 256),
        ("niah_single", 256),
        ("niah_single", 256),
        ("niah_single", 512),
    ]
    assert len({r["prompt"] for r in first}) == 12
    other_seed = generate_rows(families=["niah_single"], lengths=[256], size=3, seed=6)
    assert not {r["prompt"] for r in other_seed} & {r["prompt"] for r in first}
    # More rows keep the first ones.
    assert generate_rows(families=["niah_single"], lengths=[256], size=5, seed=5)[:3] == first[:3]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_reaches_the_longest_setting_and_its_reference_still_scores(family):
    row = _row(family, MAX_LENGTH)
    assert MAX_LENGTH - SHORTFALL <= row["prompt_tokens"] <= MAX_LENGTH
    scorer = build_scorer(FAMILIES[family].spec)
    assert scorer.score(row, row["answer"]).score == 1.0 and scorer.score(row, "no idea").score == 0.0


def test_the_tiny_tokenizer_counts_one_token_a_byte():
    tokenizer = build_char_tokenizer()
    sample = _row("repo_qa", 2048)["prompt"]
    ids = tokenizer(sample)["input_ids"]
    assert len(ids) == len(sample.encode()) and tokenizer.unk_token_id not in ids


def test_another_tokenizer_s_count_sizes_the_prompt():
    def words(text: str) -> int:  # a stand-in for a merging tokenizer: one token a word
        return len(text.split())

    for family in ("niah_single", "variable_tracking", "repo_qa"):
        row = family_row(family=family, length=2048, seed=1, index=0, count=words)
        assert row["prompt_tokens"] == words(row["prompt"])
        assert 2048 - 100 <= row["prompt_tokens"] <= 2048
        assert len(row["prompt"].encode()) > 4 * 2048  # several bytes a word


def test_needles_sit_at_varied_depths_and_distractors_have_other_values():
    depths = {_row("niah_single", 4096, index=i)["metadata"]["depth"] for i in range(12)}
    assert min(depths) < 0.3 and max(depths) > 0.7
    row = _row("niah_multikey", 4096)
    needles = re.findall(r"magic numbers for ([a-z-]+) is: (\d+)\.", row["prompt"])
    assert len(needles) == 4 and len({v for _, v in needles}) == 4
    assert dict(needles)[row["metadata"]["key"]] == row["answer"]


def test_variable_tracking_answer_is_what_running_the_program_gives():
    for index in range(3):
        row = _row("variable_tracking", 2048, index=index)
        values: dict[str, str] = {}
        for target, source in re.findall(r"^var (\w+) = (var \w+|\d+)$", row["prompt"], flags=re.M):
            values[target] = values.get(source[4:], "?") if source.startswith("var ") else source
        wanted = re.search(r"assigned the value (\d+)\?", row["prompt"]).group(1)
        assert sorted(name for name, value in values.items() if value == wanted) == sorted(row["answers"])


def test_table_aggregate_answer_is_the_sum_or_count_of_the_matching_rows():
    kinds = set()
    for index in range(6):
        row = _row("table_aggregate", 4096, index=index)
        item = row["metadata"]["item"]
        units = [
            int(u)
            for name, u in re.findall(r"^\| \d+ \| \w+ \| (\w+) \| (\d+) \|$", row["prompt"], re.M)
            if name == item
        ]
        kinds.add(row["metadata"]["kind"])
        expected = sum(units) if row["metadata"]["kind"] == "sum" else len(units)
        assert row["answer"] == str(expected) and len(units) >= 2
    assert kinds == {"sum", "count"}


def test_common_words_answer_is_the_most_frequent_words_of_the_list():
    row = _row("common_words", 8192)
    listed = [line for line in row["prompt"].split("\n")[1:-2] if line]
    counts = Counter(listed)
    top = [word for word, _ in counts.most_common(len(row["answers"]))]
    assert sorted(top) == sorted(row["answers"])
    assert counts.most_common()[len(row["answers"])][1] < counts[row["answers"][-1]]


def test_repo_qa_answers_from_the_repository_text():
    seen = set()
    for index in range(8):
        row = _row("repo_qa", 4096, index=index)
        files = dict(
            re.findall(r"^### file: (\S+)\n(.*?)(?=^### file: |^question: )", row["prompt"], re.M | re.S)
        )
        assert len(files) >= 4
        if row["metadata"]["kind"] == "defines":
            name = re.search(r"defines the function or class (\w+)\?", row["prompt"]).group(1)
            defining = [p for p, text in files.items() if re.search(rf"^(def|class) {name}\b", text, re.M)]
            assert defining == [row["answer"]]
        else:
            path = re.search(r"does the file (\S+) define\?", row["prompt"]).group(1)
            assert row["answer"] == str(len(re.findall(r"^    def test", files[path], re.M)))
        seen.add(row["metadata"]["kind"])
    assert seen == {"defines", "tests"}


@pytest.mark.parametrize(
    ("request_", "field", "words"),
    [
        ({"families": ["haystack"]}, "families", "unknown family 'haystack'"),
        ({"lengths": [128]}, "lengths", "from 256 to 131,072"),
        ({"families": ["repo_qa"], "lengths": [512]}, "lengths", "repo_qa needs at least 1024"),
        ({"lengths": [131072], "size": 100}, "size", "at most 8,000,000"),
        ({"lengths": [256, 256]}, "lengths", "listed twice"),
    ],
)
def test_requests_that_cannot_be_made_name_the_setting(request_, field, words):
    settings = {"families": ["niah_single"], "lengths": [256], "size": 1, "seed": 0} | request_
    with pytest.raises(RequestError) as caught:
        check_request(**settings)
    assert caught.value.field == field and words in caught.value.message
