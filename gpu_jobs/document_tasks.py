"""Anneal's own document tasks, generated offline like the reasoning-gym packs (anneal.datasets.pack_catalogue
offers them beside those): each row a generated document and a question whose answer is checked as data.

- ``report_tables``: a shipping report in prose (shipments in varied phrasings among unrelated sentences); the
  answer is the table of the shipments asked for (every one, or those from one city at higher difficulty), in
  the order the report gives them, checked cell by cell by the ``table`` verifier (gpu_jobs.rewards.table).
  Difficulty 0-5: 2 shipments and 3 columns at 0, up to 12 shipments, 4 columns and a city filter at 5.

Rows are a function of (task, seed, index, difficulty); the reference is the generator's own record of what it
wrote, never re-read from the text.
"""

from __future__ import annotations

import csv
import io
import random
from collections.abc import Callable
from dataclasses import dataclass

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


TASKS: dict[str, DocumentTask] = {
    "report_tables": DocumentTask(
        "report_tables",
        "the shipments of a prose report, as a table (the table verifier, cell by cell)",
        report_table,
        {"type": "table", "reference_field": "table", "row_order": "strict", "columns": "name"},
    ),
}


def document_rows(*, task: str, size: int, seed: int, difficulty: int | None) -> list[dict]:
    """``size`` rows of document task ``task`` (KeyError for another name); difficulty None is 1."""
    chosen = TASKS[task]
    level = 1 if difficulty is None else max(0, min(MAX_DIFFICULTY, difficulty))
    rows = []
    for index in range(size):
        rng = random.Random(f"{task}|{seed}|{index}|{level}")
        row = chosen.make(rng, level)
        row.update(domain=task, difficulty=level if difficulty is not None else "default")
        rows.append(row)
    return rows
