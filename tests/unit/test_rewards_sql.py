"""The sql_result verifier, through the real sandbox (the local bubblewrap backend): the answer's query on the
row's fixture database against the reference query's result, as a multiset or in order, floats within the
tolerance; a query that writes, attaches, loops or fails scores 0 and says why."""

import pytest

from gpu_jobs.rewards import build_scorer, validate_spec
from gpu_jobs.rewards.base import SpecError
from gpu_jobs.rewards.sql_result import extract_sql
from sandboxes.client import SandboxClient

SCHEMA = """
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, amount REAL);
INSERT INTO customers VALUES (1, 'Ada', 'Lyon'), (2, 'Bob', 'Porto'), (3, 'Cy', 'Lyon');
INSERT INTO orders VALUES (1, 1, 10.5), (2, 1, 4.5), (3, 2, 7.25), (4, 3, 1.0);
"""
ROW = {
    "prompt": "Total order amount per city.",
    "schema": SCHEMA,
    "answer": "SELECT c.city, SUM(o.amount) FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.city",
}


@pytest.fixture(scope="module")
def sandbox():
    return SandboxClient()


def scorer(sandbox, **spec):
    return build_scorer({"type": "sql_result", **spec}, sandbox=sandbox)


def test_the_same_rows_by_another_query_in_another_order_score_1(sandbox):
    other = (
        "```sql\nSELECT city, SUM(amount) AS total FROM orders JOIN customers ON customers.id = orders.customer_id "
        "GROUP BY city ORDER BY total ASC;\n```"
    )
    result = scorer(sandbox).score(ROW, other)
    assert result.score == 1.0, result.reason
    assert result.parts == {"match": 1.0, "rows_expected": 2.0, "rows_returned": 2.0}
    ordered = {**ROW, "answer": ROW["answer"] + " ORDER BY c.city"}
    assert scorer(sandbox, order_sensitive=True).score(ordered, other).score == 0.0
    assert scorer(sandbox, order_sensitive=True).score(ordered, ordered["answer"]).score == 1.0


def test_wrong_rows_columns_and_counts_score_0_with_the_reason(sandbox):
    cases = [
        (
            "SELECT city, SUM(amount) + 1 FROM orders JOIN customers ON customers.id = customer_id GROUP BY city",
            "is not in the result",
        ),
        ("SELECT city FROM customers GROUP BY city", "1 columns, the reference has 2"),
        (
            "SELECT city, amount FROM orders JOIN customers ON customers.id = customer_id",
            "4 rows, the reference has 2",
        ),
        ("SELEKT 1", "the query failed: OperationalError"),
        ("", "no SQL query in the answer"),
    ]
    results = scorer(sandbox).score_batch([ROW] * len(cases), [query for query, _ in cases])
    for (query, reason), result in zip(cases, results, strict=True):
        assert result.score == 0.0 and reason in result.reason, (query, result.reason)


def test_floats_match_within_the_tolerance(sandbox):
    near = "SELECT c.city, SUM(o.amount) + 0.001 FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.city"
    assert scorer(sandbox).score(ROW, near).score == 0.0
    assert scorer(sandbox, float_tolerance=0.01).score(ROW, near).score == 1.0


@pytest.mark.parametrize(
    "query",
    [
        "DELETE FROM orders",
        "INSERT INTO orders VALUES (9, 1, 1.0)",
        "ATTACH DATABASE '/tmp/x.db' AS x",
        "PRAGMA writable_schema = ON",
        "DROP TABLE customers",
    ],
)
def test_a_query_that_would_write_or_reach_outside_is_refused(sandbox, query):
    result = scorer(sandbox).score(ROW, query)
    assert result.score == 0.0 and "not authorized" in result.reason, result.reason


def test_a_query_that_never_ends_is_stopped_at_its_time_limit(sandbox):
    forever = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n"
    result = scorer(sandbox, timeout_s=1).score(ROW, forever)
    assert result.score == 0.0 and "time limit" in result.reason, result.reason


def test_rows_without_a_fixture_or_reference_say_which_field(sandbox):
    assert "'schema'" in scorer(sandbox).score({"answer": "SELECT 1"}, "SELECT 1").reason
    assert "'answer'" in scorer(sandbox).score({"schema": SCHEMA}, "SELECT 1").reason


def test_the_query_is_read_from_a_fence_or_the_whole_answer():
    assert extract_sql("Here:\n```sql\nSELECT 1;\n```\nDone.") == "SELECT 1"
    assert extract_sql("  SELECT 2 ; ") == "SELECT 2"


def test_bad_specs_are_refused_naming_the_field():
    for spec, field in (({"timeout_s": 0}, "timeout_s"), ({"float_tolerance": 2}, "float_tolerance")):
        with pytest.raises(SpecError) as error:
            validate_spec({"type": "sql_result", **spec})
        assert error.value.field == field


def test_a_query_that_floods_memory_or_output_fails_alone_and_the_batch_keeps_its_verdicts(sandbox):
    hostile = [
        "SELECT length(zeroblob(100000000)), 1",  # past SQLite's length limit
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 999) "
        "SELECT x, printf('%.*c', 190, 'y') || x FROM n",  # 999 rows of 190+ characters: past the result's bytes
        "SELECT randomblob(500000)",  # a long blob crosses as its digest
    ]
    answers = [ROW["answer"], *hostile, ROW["answer"]]
    results = scorer(sandbox).score_batch([ROW] * len(answers), answers)
    assert [r.score for r in results] == [1.0, 0.0, 0.0, 0.0, 1.0], [r.reason for r in results]
    assert "too big" in results[1].reason and "bytes of JSON" in results[2].reason
    assert "1 columns, the reference has 2" in results[3].reason


def test_long_texts_compare_by_digest_and_still_match():
    from sandboxes.client import SandboxClient as Client

    long = "x" * 5000
    row = {
        "schema": f"CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('{long}');",
        "answer": "SELECT v FROM t",
    }
    sql = build_scorer({"type": "sql_result"}, sandbox=Client())
    assert sql.score(row, "SELECT v FROM t").score == 1.0
    assert sql.score(row, "SELECT v || 'y' FROM t").score == 0.0


def test_the_docker_backend_judges_the_same_way():
    from sandboxes.backends.docker import DockerBackend

    backend = DockerBackend(pool_size=0)
    problem = backend.engine_problem()
    if problem:
        pytest.skip(f"no Docker API here: {problem}")
    sql = build_scorer({"type": "sql_result"}, sandbox=backend)
    results = sql.score_batch([ROW] * 3, [ROW["answer"], "DELETE FROM orders", "SELECT 1, 2"])
    assert [r.score for r in results] == [1.0, 0.0, 0.0], [r.reason for r in results]
    assert "not authorized" in results[1].reason


# --- engine postgresql: a server of the run's own in the sandbox (profile sql-postgres) ----------------------

PG_SCHEMA = (
    "CREATE TABLE customers (id int PRIMARY KEY, name text, city text);"
    "CREATE TABLE orders (id int, customer_id int, amount numeric(8, 2), placed date);"
    "INSERT INTO customers VALUES (1, 'Ada', 'Lyon'), (2, 'Bob', 'Porto'), (3, 'Cy', 'Lyon');"
    "INSERT INTO orders VALUES (1, 1, 10.5, '2026-01-02'), (2, 1, 4.5, '2026-01-03'), (3, 2, 7.25, '2026-02-01'),"
    " (4, 3, 1.0, '2026-02-02');"
)
PG_ROW = {
    "schema": PG_SCHEMA,
    "answer": "SELECT c.city, SUM(o.amount), MAX(o.placed) FROM customers c JOIN orders o ON o.customer_id = c.id "
    "GROUP BY c.city",
}


def test_postgresql_compares_result_sets_and_refuses_every_write_and_escape(sandbox):
    pg = build_scorer({"type": "sql_result", "engine": "postgresql", "timeout_s": 3}, sandbox=sandbox)
    answers = [
        "```sql\nSELECT city, SUM(amount), MAX(placed) FROM orders JOIN customers ON customers.id = customer_id "
        "GROUP BY city ORDER BY 2;\n```",
        "SELECT city, COUNT(*), NULL FROM customers GROUP BY city",
        "SET default_transaction_read_only = off; DELETE FROM orders; SELECT 1, 2, 3",
        "SET statement_timeout = 0; SELECT pg_sleep(60), 1, 2",
        "SELECT pg_read_file('/etc/passwd'), 1, 2",
        "COPY orders TO PROGRAM 'id'",
        "CREATE TEMP TABLE t (a int)",
        PG_ROW["answer"],  # after all of the above, the fixture is as it was
    ]
    results = pg.score_batch([PG_ROW] * len(answers), answers)
    assert [r.score for r in results] == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0], [r.reason for r in results]
    assert results[0].reason == "the same 2 rows as the reference"
    assert results[2].reason.startswith("the query failed: ReadOnlySqlTransaction")
    assert results[3].reason == "the query failed: OperationalError: ran past its time limit"
    assert "permission denied for function pg_read_file" in results[4].reason
    assert "must be superuser" in results[5].reason
    assert results[6].reason.startswith("the query failed: ReadOnlySqlTransaction")


def test_postgresql_on_the_docker_backend():
    from sandboxes.backends.docker import DockerBackend

    backend = DockerBackend(pool_size=0)
    problem = backend.engine_problem("sql-postgres")
    if problem:
        pytest.skip(problem)
    pg = build_scorer({"type": "sql_result", "engine": "postgresql"}, sandbox=backend)
    results = pg.score_batch([PG_ROW] * 2, [PG_ROW["answer"], "DELETE FROM orders"])
    assert [r.score for r in results] == [1.0, 0.0], [r.reason for r in results]
