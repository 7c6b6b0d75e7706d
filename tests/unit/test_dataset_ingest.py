"""Parsing, mapping, validation, duplicates and statistics of an upload, without Django.

Run alone with: .venv/bin/pytest tests/unit/test_dataset_ingest.py -p no:django
"""

import csv
import gzip
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from anneal.datasets.ingest import Progress, ingest_file, read_rows
from anneal.datasets.mapping import Mapping, MappingError
from anneal.datasets.readers import ReadLimits
from anneal.datasets.tokens import token_counter

ROWS = [
    {"question": "12+45=", "solution": "57", "topic": "add", "level": 1, "source": "a"},
    {"question": "3*4=", "solution": "12", "topic": "mul", "level": 2, "source": "b"},
    {"question": "20-2=", "solution": "18", "topic": "sub", "level": 1, "source": "c"},
]
MAPPING = Mapping.from_dict(
    {"prompt": "question", "answer": "solution", "domain": "topic", "difficulty": "level"}
)


def jsonl(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def csv_bytes(rows) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


def parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def run(tmp_path: Path, name: str, body: bytes, mapping: Mapping = MAPPING, limits: ReadLimits | None = None):
    source = tmp_path / "upload"
    source.write_bytes(body)
    target = tmp_path / "rows.jsonl"
    seen: list[Progress] = []
    report = ingest_file(
        path=source,
        file_name=name,
        mapping=mapping,
        target=target,
        limits=limits or ReadLimits(),
        tokens=token_counter("tiny"),
        on_progress=seen.append,
        errors_to=tmp_path / "errors.jsonl",
    )
    return report, target, seen


def formats():
    table = pa.Table.from_pylist(ROWS)
    return {
        "rows.jsonl": jsonl(ROWS),
        "rows.jsonl.gz": gzip.compress(jsonl(ROWS)),
        "rows.csv": csv_bytes(ROWS),
        "rows.csv.gz": gzip.compress(csv_bytes(ROWS)),
        "rows.parquet": parquet_bytes(table),
        "rows.parquet.gz": gzip.compress(parquet_bytes(table)),
    }


@pytest.mark.parametrize("name", list(formats()))
def test_every_format_gives_the_same_canonical_rows(tmp_path, name):
    report, target, seen = run(tmp_path, name, formats()[name])
    assert report.ok and report.error_count == 0, report.errors
    rows = read_rows(target)
    assert [r["prompt"] for r in rows] == ["12+45=", "3*4=", "20-2="]
    assert [r["answer"] for r in rows] == ["57", "12", "18"]
    assert [r["domain"] for r in rows] == ["add", "mul", "sub"]
    # CSV cells are text: a numeric label becomes a number, as in JSONL and Parquet.
    assert [r["difficulty"] for r in rows] == [1, 2, 1]
    assert [r["source"] for r in rows] == ["a", "b", "c"]  # free metadata kept
    assert report.stats["domains"] == {"add": 1, "mul": 1, "sub": 1}
    assert report.stats["prompt_tokens"]["max"] == len("12+45=")
    assert seen[-1].fraction == 1.0


def test_exact_duplicates_are_removed_and_counted(tmp_path):
    body = jsonl([ROWS[0], ROWS[1], ROWS[0], ROWS[2], ROWS[0]])
    report, target, _ = run(tmp_path, "d.jsonl", body)
    assert report.rows == 3 and report.duplicates == 2
    assert report.duplicate_examples == [{"row": 3, "duplicate_of": 1}, {"row": 5, "duplicate_of": 1}]
    assert len(read_rows(target)) == 3
    assert report.stats["rows"] == 3 and report.stats["domains"] == {"add": 1, "mul": 1, "sub": 1}


def test_bad_rows_are_named_by_row_and_field_and_the_good_ones_kept(tmp_path):
    rows = [
        ROWS[0],
        {"question": "", "solution": "1", "topic": "x"},
        {"question": "q", "solution": ["not", "text"], "topic": "x"},
        {"solution": "3", "topic": "x"},
        ROWS[1],
    ]
    deep = b'{"question": "q", "meta": ' + b"[" * 5000 + b"]" * 5000 + b"}\n"  # json.loads: RecursionError
    body = jsonl(rows) + b"{broken\n" + b'{"question": "\xff\xfe"}\n' + deep
    report, target, _ = run(tmp_path, "bad.jsonl", body)
    assert report.rows == 2 and report.ok
    assert [(e["row"], e["field"]) for e in report.errors] == [
        (2, "question"),
        (3, "solution"),
        (4, "question"),
        (6, "(line)"),
        (7, "(line)"),
        (8, "(line)"),
    ]
    assert report.errors[0]["message"] == "prompt is empty"
    assert report.errors[2]["message"] == "missing column 'question' (mapped to prompt)"
    assert "not valid JSON" in report.errors[3]["message"]
    assert "not valid UTF-8" in report.errors[4]["message"]
    assert report.errors[5]["message"] == "the JSON is nested more than 100 levels deep (the limit)"
    assert len((tmp_path / "errors.jsonl").read_text().splitlines()) == 6


def test_chat_prompts_and_tests_lists(tmp_path):
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    rows = [
        {"messages": chat, "tests": ["assert result == 4"]},
        {"messages": json.dumps(chat), "tests": "assert result == 4"},
        {"messages": [{"role": "wizard", "content": "hi"}], "tests": []},
    ]
    mapping = Mapping.from_dict({"prompt": "messages", "tests": "tests", "prompt_format": "chat"})
    report, target, _ = run(tmp_path, "chat.jsonl", jsonl(rows), mapping)
    stored = read_rows(target)
    assert stored == [{"prompt": chat, "tests": ["assert result == 4"]}]
    # Row 2 (messages and tests as JSON text, as a CSV carries them) is row 1 after mapping: a duplicate.
    assert report.duplicates == 1
    assert report.errors == [
        {
            "row": 3,
            "field": "messages",
            "message": "message 1 has role 'wizard'; roles: system, user, assistant, tool",
        }
    ]
    assert report.stats["prompt_tokens"]["max"] == len("Be brief.\n2+2?")


def test_metadata_columns_limit_what_is_kept(tmp_path):
    mapping = Mapping.from_dict({"prompt": "question", "metadata": ["source"]})
    _, target, _ = run(tmp_path, "m.jsonl", jsonl(ROWS), mapping)
    assert read_rows(target)[0] == {"prompt": "12+45=", "source": "a"}


def test_mapping_errors_name_the_key():
    with pytest.raises(MappingError) as missing:
        Mapping.from_dict({"prompt": ""})
    assert missing.value.field == "mapping.prompt"
    with pytest.raises(MappingError) as twice:
        Mapping.from_dict({"prompt": "q", "answer": "q"})
    assert "more than one role" in twice.value.message
    with pytest.raises(MappingError):
        Mapping.from_dict({"prompt": "q", "colour": "x"})


def test_the_tiny_tokenizer_counts_one_token_per_utf8_byte():
    counter = token_counter("tiny")
    texts = ["12+45=", "Grüße, 世界!", "", "line\nbreak\ttab"]
    real = [len(e.ids) for e in counter.tokenizer.encode_batch(texts, add_special_tokens=False)]
    assert counter.count(texts) == real


def test_progress_is_reported_while_reading(tmp_path):
    rows = [{"question": f"{i}+1=", "solution": str(i + 1), "topic": "t"} for i in range(12_000)]
    report, _, seen = run(tmp_path, "big.jsonl", jsonl(rows))
    assert report.rows == 12_000
    assert [p.rows_read for p in seen[:2]] == [5000, 10_000]
    assert 0 < seen[0].fraction < seen[1].fraction < 1.0 == seen[-1].fraction


def test_split_free_read_rows_pages(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(jsonl(ROWS))
    assert read_rows(path, offset=1, limit=1) == [ROWS[1]]
