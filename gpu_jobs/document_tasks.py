"""Anneal's own document tasks, generated offline like the reasoning-gym packs (anneal.datasets.pack_catalogue
offers them beside those): each row a generated document and a question whose answer is checked as data.

- ``sql_queries``: a generated shop database (customers, products, orders; its schema in the prompt, its rows
  in the row's ``schema`` column) and a question a SQL query answers, checked by running the answer's query
  against the reference's (the ``sql_result`` verifier, in a sandbox). Difficulty 0-5: a count, a filter, a sum
  over a join, a GROUP BY, a HAVING, a filtered aggregate over three tables; more rows as it grows.
- ``report_tables``: a shipping report in prose (shipments in varied phrasings among unrelated sentences); the
  answer is the table of the shipments asked for (every one, or those from one city at higher difficulty), in
  the order the report gives them, checked cell by cell by the ``table`` verifier (gpu_jobs.rewards.table).
  Difficulty 0-5: 2 shipments and 3 columns at 0, up to 12 shipments, 4 columns and a city filter at 5.

- ``svg_shapes``: circles, rectangles and lines on a 64x64 canvas, described in words with their coordinates; the
  answer is an SVG, rendered in a sandbox and compared with the reference's rendering by the ``render``
  verifier. Difficulty 0-5: one circle or rectangle at 0, four shapes with lines among them at 5.
- ``sheet_formulas``: a sheet of items (item, region, quantity, unit price) in the prompt; the answer gives
  formulas for each row's revenue and, as difficulty grows, 1 to 6 summaries (a total, a count and a sum by
  region, a maximum, a rounded average), evaluated by LibreOffice for the ``spreadsheet`` verifier.
- ``programs_c``, ``programs_cpp``, ``programs_javascript``: Anneal's hand-written programming problems
  (gpu_jobs/program_tasks.py), scored by ``code_tests`` in the language's sandbox profile.

Rows are a function of (task, seed, index, difficulty); the reference is the generator's own record of what it
wrote, never re-read from the text.
"""

from __future__ import annotations

import csv
import io
import random
from collections.abc import Callable
from dataclasses import dataclass

from gpu_jobs import program_tasks

CITIES = ["Lyon", "Porto", "Gdansk", "Tampere", "Bilbao", "Graz", "Utrecht", "Brno", "Cork", "Turin"]
GOODS = ["valves", "cables", "pumps", "sensors", "panels", "filters", "bearings", "gaskets"]
PHRASINGS = (
    "On day {day}, {count} {goods} left {origin} for {destination}, at a cost of {cost} euros.",
    "{origin} shipped {count} {goods} to {destination} on day {day}; the freight cost {cost} euros.",
    "A load of {count} {goods} went from {origin} to {destination} (day {day}, {cost} euros).",
    "Day {day}: {cost} euros paid to move {count} {goods} out of {origin}, bound for {destination}.",
)
FILLER = (
    "The warehouse in {city} was repainted over the weekend.",
    "Staff in {city} reported that the loading dock lights were replaced.",
    "A customs officer visited the {city} depot; no findings were recorded.",
    "Weather delayed the morning shift in {city} by an hour.",
    "The team in {city} welcomed two new drivers.",
)
MAX_DIFFICULTY = 5


@dataclass(frozen=True)
class DocumentTask:
    name: str
    description: str
    make: Callable[[random.Random, int], dict]
    spec: dict
    # Whether a generated row is sound (its reference is right), checked where the row is made, without a
    # sandbox: the pack keeps only rows that pass.
    check: Callable[[dict], bool]
    # A task drawn from a fixed set (program_tasks): all of a pack's rows at once, (size, seed, difficulty).
    rows: Callable[[int, int, int | None], list[dict]] | None = None


def _shipment(rng: random.Random) -> dict:
    origin, destination = rng.sample(CITIES, 2)
    return {
        "day": rng.randint(1, 365),
        "count": rng.randint(2, 900),
        "goods": rng.choice(GOODS),
        "origin": origin,
        "destination": destination,
        "cost": rng.randint(100, 9999),
    }


def _csv(header: list[str], rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([[row[key] for key in header] for row in rows])
    return out.getvalue().strip()


def report_table(rng: random.Random, difficulty: int) -> dict:
    count = 2 + 2 * difficulty
    columns = ["goods", "count", "cost"] if difficulty < 3 else ["day", "goods", "count", "cost"]
    shipments = [_shipment(rng) for _ in range(count)]
    city = None
    if difficulty >= 2:
        # Ask for one city's shipments; make sure it has at least two among the others.
        city = rng.choice(CITIES)
        for shipment in rng.sample(shipments, 2):
            shipment["origin"] = city
            if shipment["destination"] == city:
                shipment["destination"] = rng.choice([c for c in CITIES if c != city])
    lines = [rng.choice(PHRASINGS).format(**s) for s in shipments]
    for _ in range(max(1, count // 2)):
        lines.insert(rng.randint(0, len(lines)), rng.choice(FILLER).format(city=rng.choice(CITIES)))
    wanted = [s for s in shipments if city is None or s["origin"] == city]
    which = f"every shipment that left {city}" if city else "every shipment"
    prompt = (
        "Shipping report.\n"
        + "\n".join(lines)
        + f"\n\nList {which} as a table with the columns {', '.join(columns)} (cost in euros, numbers "
        "only), one row per shipment in the order the report gives them. Answer with a CSV or Markdown table."
    )
    table = [{key: s[key] for key in columns} for s in wanted]
    return {"prompt": prompt, "answer": _csv(columns, wanted), "table": table}


def _table_check(row: dict) -> bool:
    from gpu_jobs.rewards import build_scorer

    scorer = build_scorer(TASKS["report_tables"].spec)
    return scorer.score(row, row["answer"]).score == 1.0 and scorer.score(row, "no idea").score == 0.0


SHOP_SCHEMA = """CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL);
CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL, price REAL NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
  product_id INTEGER NOT NULL REFERENCES products(id), quantity INTEGER NOT NULL, day INTEGER NOT NULL);"""
NAMES = ["Ada", "Bob", "Chen", "Dara", "Eli", "Femi", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lea"]
CATEGORIES = ["tools", "garden", "kitchen", "office"]


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def sql_query(rng: random.Random, difficulty: int) -> dict:
    customers = [
        (i + 1, name, rng.choice(CITIES[:4])) for i, name in enumerate(rng.sample(NAMES, 6 + difficulty))
    ]
    products = [
        (i + 1, f"{rng.choice(GOODS)}-{i + 1}", rng.choice(CATEGORIES), round(rng.uniform(2, 90), 2))
        for i in range(5 + difficulty)
    ]
    orders = [
        (i + 1, rng.choice(customers)[0], rng.choice(products)[0], rng.randint(1, 9), rng.randint(1, 90))
        for i in range(12 + 4 * difficulty)
    ]
    inserts = [
        "INSERT INTO customers VALUES "
        + ", ".join(f"({i}, {_quoted(n)}, {_quoted(c)})" for i, n, c in customers)
        + ";",
        "INSERT INTO products VALUES "
        + ", ".join(f"({i}, {_quoted(n)}, {_quoted(c)}, {p})" for i, n, c, p in products)
        + ";",
        "INSERT INTO orders VALUES "
        + ", ".join(f"({i}, {c}, {p}, {q}, {d})" for i, c, p, q, d in orders)
        + ";",
    ]
    city = rng.choice([c for _, _, c in customers])
    name = rng.choice([n for _, n, _ in customers])
    category = rng.choice([c for _, _, c, _ in products])
    threshold = rng.randint(1, 3)
    join = "FROM orders o JOIN customers c ON c.id = o.customer_id JOIN products p ON p.id = o.product_id"
    questions = [
        (
            f"How many customers live in {city}?",
            f"SELECT COUNT(*) FROM customers WHERE city = {_quoted(city)}",
        ),
        (
            f"The names of the customers who live in {city}.",
            f"SELECT name FROM customers WHERE city = {_quoted(city)}",
        ),
        (
            f"How many items (the sum of quantities) has {name} ordered in all?",
            f"SELECT COALESCE(SUM(o.quantity), 0) {join} WHERE c.name = {_quoted(name)}",
        ),
        (
            "For each city, the number of orders its customers placed (one row per city with at least one order: "
            "city, count).",
            f"SELECT c.city, COUNT(*) {join} GROUP BY c.city",
        ),
        (
            f"The names of the customers who placed more than {threshold} orders.",
            f"SELECT c.name {join} GROUP BY c.id HAVING COUNT(*) > {threshold}",
        ),
        (
            f"The revenue (quantity times price) of the {category} category, per customer name (name, revenue; "
            "customers with no such order left out).",
            f"SELECT c.name, SUM(o.quantity * p.price) {join} WHERE p.category = {_quoted(category)} GROUP BY c.id",
        ),
    ]
    question, reference = questions[difficulty]
    schema = SHOP_SCHEMA + "\n" + "\n".join(inserts)
    prompt = (
        "A SQLite database of a shop:\n\n"
        + SHOP_SCHEMA
        + "\n\nWrite one SQL query (SQLite) that answers: "
        + question
        + " Answer with the query in a ```sql block."
    )
    return {"prompt": prompt, "schema": schema, "answer": reference}


def _sql_check(row: dict) -> bool:
    import sqlite3

    db = sqlite3.connect(":memory:")
    try:
        db.executescript(row["schema"])
        return len(db.execute(row["answer"]).fetchall()) >= 1
    except sqlite3.Error:
        return False
    finally:
        db.close()


COLOURS = ("red", "blue", "green", "black", "orange", "purple")
CANVAS = 64


def _shape(rng: random.Random, kind: str) -> tuple[str, str]:
    """(description, SVG element) of one shape that fits the canvas."""
    colour = rng.choice(COLOURS)
    if kind == "circle":
        r = rng.randint(5, 14)
        cx, cy = rng.randint(r, CANVAS - r), rng.randint(r, CANVAS - r)
        return (
            f"a {colour} filled circle centred at ({cx}, {cy}) with radius {r}",
            f'<circle cx="{cx}" cy="{cy}" r="{r}" fill="{colour}"/>',
        )
    if kind == "rect":
        w, h = rng.randint(8, 30), rng.randint(8, 30)
        x, y = rng.randint(0, CANVAS - w), rng.randint(0, CANVAS - h)
        return (
            f"a {colour} filled rectangle with its top-left corner at ({x}, {y}), {w} wide and {h} tall",
            f'<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="{colour}"/>',
        )
    x1, y1, x2, y2 = (rng.randint(2, CANVAS - 2) for _ in range(4))
    width = rng.randint(2, 5)
    return (
        f"a {colour} line from ({x1}, {y1}) to ({x2}, {y2}), {width} pixels thick",
        f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{colour}" stroke-width="{width}"/>',
    )


def svg_shapes(rng: random.Random, difficulty: int) -> dict:
    """Shapes on a 64x64 white canvas, described in words; the answer is an SVG that draws them. Difficulty 0-5:
    one circle or rectangle at 0, up to four shapes with lines among them at 5, later shapes over earlier ones."""
    kinds = ("circle", "rect") if difficulty < 3 else ("circle", "rect", "line")
    shapes = [_shape(rng, rng.choice(kinds)) for _ in range(1 + (difficulty + 1) // 2)]
    described = "; ".join(description for description, _ in shapes)
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{CANVAS}" height="{CANVAS}" '
        f'viewBox="0 0 {CANVAS} {CANVAS}">' + "".join(element for _, element in shapes) + "</svg>"
    )
    prompt = (
        f"Write an SVG image {CANVAS} by {CANVAS} pixels on a white background (coordinates in pixels, the "
        f"origin at the top-left corner, each shape drawn over the ones before it) that shows: {described}. "
        "Give the SVG in one ```svg block."
    )
    return {"prompt": prompt, "svg": svg, "answer": f"```svg\n{svg}\n```"}


def _svg_check(row: dict) -> bool:
    import xml.etree.ElementTree as ElementTree

    try:
        root = ElementTree.fromstring(row["svg"])
    except ElementTree.ParseError:
        return False
    return root.tag.endswith("svg") and len(root) >= 1


REGIONS = ("north", "south", "east", "west")
# (what the cell holds, its formula for a sheet whose items are rows 2..last); the first `1 + difficulty` of
# them after each row's revenue are asked for, in cells G1, G2, ...
SUMMARIES = (
    ("the total revenue (column E)", "=SUM(E2:E{last})"),
    ("the total quantity", "=SUM(C2:C{last})"),
    ("how many items are in the {region} region", '=COUNTIF(B2:B{last},"{region}")'),
    ("the revenue of the {region} region", '=SUMIF(B2:B{last},"{region}",E2:E{last})'),
    ("the highest unit price", "=MAX(D2:D{last})"),
    ("the average revenue per item, rounded to 2 decimals", "=ROUND(AVERAGE(E2:E{last}),2)"),
)


def sheet_formulas(rng: random.Random, difficulty: int) -> dict:
    """A sheet of items (A item, B region, C quantity, D unit price, from row 2); the answer gives formulas:
    each row's revenue in column E, then 1 + difficulty summaries (a total, a count or a sum by region, a
    maximum, a rounded average) in G1, G2, ... Checked by the spreadsheet verifier (LibreOffice, in a
    sandbox), on the sheet and on a copy whose numbers changed, so typed-in values fail."""
    count = rng.randint(3, 4 + difficulty)
    last = count + 1
    sheet: dict = {"A1": "item", "B1": "region", "C1": "quantity", "D1": "unit price", "E1": "revenue"}
    for row in range(2, last + 1):
        sheet[f"A{row}"] = rng.choice(GOODS)
        sheet[f"B{row}"] = rng.choice(REGIONS)
        sheet[f"C{row}"] = rng.randint(1, 50)
        sheet[f"D{row}"] = round(rng.uniform(0.5, 40), 2)
    region = rng.choice([sheet[f"B{row}"] for row in range(2, last + 1)])
    formulas = {f"E{row}": f"=C{row}*D{row}" for row in range(2, last + 1)}
    asked = [f"E2 to E{last}: each item's revenue (its quantity times its unit price)"]
    for number, (what, formula) in enumerate(SUMMARIES[: 1 + difficulty], start=1):
        sheet[f"F{number}"] = what.format(region=region)
        formulas[f"G{number}"] = formula.format(last=last, region=region)
        asked.append(f"G{number}: {what.format(region=region)}")
    table = "\n".join(
        ",".join(str(sheet.get(f"{column}{row}", "")) for column in "ABCD") for row in range(1, last + 1)
    )
    prompt = (
        f"Sheet1 of a spreadsheet holds these cells in columns A to D (row 1 is the header):\n{table}\n\n"
        "Write spreadsheet formulas (Excel syntax) for these cells:\n- " + "\n- ".join(asked) + "\n\n"
        "Answer with one line per cell, such as `E2: =...`, computing from the cells (not typing in values)."
    )
    answer = "\n".join(f"{cell}: {formula}" for cell, formula in formulas.items())
    return {
        "prompt": prompt,
        "sheet": sheet,
        "targets": list(formulas),
        "formulas": formulas,
        "answer": answer,
    }


def _sheet_check(row: dict) -> bool:
    from gpu_jobs.rewards.spreadsheet import FormulaError, check_formula, workbook

    try:
        workbook(row["sheet"], {cell: check_formula(f) for cell, f in row["formulas"].items()})
    except (FormulaError, KeyError, TypeError):
        return False
    return set(row["targets"]) == set(row["formulas"])


TASKS: dict[str, DocumentTask] = {
    "report_tables": DocumentTask(
        "report_tables",
        "the shipments of a prose report, as a table (the table verifier, cell by cell)",
        report_table,
        {"type": "table", "reference_field": "table", "row_order": "strict", "columns": "name"},
        _table_check,
    ),
    "sql_queries": DocumentTask(
        "sql_queries",
        "a question about a generated shop database, answered by a SQL query (the sql_result verifier)",
        sql_query,
        {
            "type": "sql_result",
            "schema_field": "schema",
            "reference_field": "answer",
            "order_sensitive": False,
        },
        _sql_check,
    ),
    "svg_shapes": DocumentTask(
        "svg_shapes",
        "shapes described in words, drawn as an SVG (the render verifier: rendered in a sandbox, compared by SSIM)",
        svg_shapes,
        {"type": "render", "reference_field": "svg", "width": CANVAS, "height": CANVAS},
        _svg_check,
    ),
    "sheet_formulas": DocumentTask(
        "sheet_formulas",
        "formulas for cells of a generated sheet of items (the spreadsheet verifier: LibreOffice, in a sandbox)",
        sheet_formulas,
        {
            "type": "spreadsheet",
            "sheet_field": "sheet",
            "targets_field": "targets",
            "reference_field": "formulas",
        },
        _sheet_check,
    ),
}


def _program_task(language: str) -> DocumentTask:
    def rows(size: int, seed: int, difficulty: int | None) -> list[dict]:
        return program_tasks.program_rows(language=language, size=size, seed=seed, difficulty=difficulty)

    name, _ = program_tasks.LANGUAGES[language]
    return DocumentTask(
        program_tasks.task_name(language),
        f"a small programming problem solved by a {name} program, run against its stdin/stdout tests "
        "(the code_tests verifier, in a sandbox)",
        lambda rng, difficulty: {},
        program_tasks.spec(language),
        program_tasks.row_is_sound,
        rows,
    )


TASKS.update(
    (program_tasks.task_name(language), _program_task(language)) for language in program_tasks.LANGUAGES
)


def document_rows(*, task: str, size: int, seed: int, difficulty: int | None) -> list[dict]:
    """``size`` rows of document task ``task`` (KeyError for another name); difficulty None is 1."""
    chosen = TASKS[task]
    if chosen.rows is not None:
        return chosen.rows(size, seed, difficulty)
    level = 1 if difficulty is None else max(0, min(MAX_DIFFICULTY, difficulty))
    rows = []
    for index in range(size):
        rng = random.Random(f"{task}|{seed}|{index}|{level}")
        row = chosen.make(rng, level)
        row.update(domain=task, difficulty=level if difficulty is not None else "default")
        rows.append(row)
    return rows
