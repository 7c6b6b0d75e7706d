"""The no-code form builder: inputs generated from each verifier type's SpecField definitions, and back.

The page's script builds the same spec live (frontend/static/anneal/verifier_builder.js) and posts it as
`spec_json`; without JavaScript the inputs themselves are posted and `spec_from_inputs` reads them.
"""

import json

from anneal import jsontext
from gpu_jobs.rewards import VERIFIER_TYPES
from gpu_jobs.rewards.base import SpecField

# Fields whose text box holds one item per line rather than JSON.
LINE_LIST_FIELDS = ("required", "forbidden", "compare_fields")
LONG_TEXT_FIELDS = ("code", "rubric", "tests", "formula")
# Inputs that matter only for one value of another input of the same type: shown only then.
SHOWN_WHEN = {
    "extract_tag": ("extract", "tag"),
    "extract_json_field": ("extract", "json_field"),
    "formula": ("mode", "formula"),
}


def names_a_column(field: SpecField) -> bool:
    """A text input naming a column of the dataset's rows (reference_field, tests_field, ...): offered as a
    pick list of the chosen dataset's columns. extract_json_field names a key in the completion instead."""
    return (
        field.name.endswith("_field") and field.name != "extract_json_field" and widget_for(field) == "text"
    )


def widget_for(field: SpecField) -> str:
    if field.choices:
        return "select"
    if field.kinds == (bool,):
        return "checkbox"
    if all(kind in (int, float) for kind in field.kinds):
        return "number"
    if field.name in LINE_LIST_FIELDS:
        return "lines"
    if field.name == "tests" and str in field.kinds:  # python_tests' assert scripts; code_tests' are JSON
        return "tests"
    if dict in field.kinds or list in field.kinds:
        return "json"
    if field.name in LONG_TEXT_FIELDS:
        return "textarea"
    return "text"


def input_name(kind: str, field: SpecField) -> str:
    return f"{kind}.{field.name}"


def _tests_blocks(text: str) -> list[str]:
    """Tests typed in a text box: blocks separated by a blank line, each block one test."""
    blocks, current = [], []
    for line in text.replace("\r\n", "\n").split("\n"):
        if line.strip():
            current.append(line)
        elif current:
            blocks.append("\n".join(current))
            current = []
    if current:
        blocks.append("\n".join(current))
    return blocks


def _number(raw: str, field: SpecField):
    try:
        value = float(raw)
    except ValueError:
        return raw  # the engine names the field and the type it wants
    if int in field.kinds and value.is_integer():
        return int(value)
    return value if float in field.kinds else raw


def spec_from_inputs(kind: str, data) -> tuple[dict, dict[str, str]]:
    """The spec the posted inputs describe for type `kind`, and problems found before the engine sees it.

    An input is read as `<type>.<field>`, else as the bare field name (older forms, API-less clients).
    Empty inputs are left out so the engine fills its default.
    """
    cls = VERIFIER_TYPES[kind]
    spec: dict = {"type": kind}
    problems: dict[str, str] = {}
    for field in cls.fields:
        widget = widget_for(field)
        name = input_name(kind, field)
        present = name in data or field.name in data
        raw = data.get(name, data.get(field.name, ""))
        if widget == "checkbox":
            if present or any(key.startswith(f"{kind}.") for key in data) or field.name in data:
                spec[field.name] = raw not in ("", None, False, "false", "off")
            continue
        raw = raw if isinstance(raw, str) else str(raw)
        if not raw.strip():
            continue
        if widget == "number":
            spec[field.name] = _number(raw.strip(), field)
        elif widget == "lines":
            spec[field.name] = [line.strip() for line in raw.splitlines() if line.strip()]
        elif widget == "tests":
            spec[field.name] = _tests_blocks(raw)
        elif widget == "json":
            try:
                spec[field.name] = jsontext.loads(raw)
            except ValueError as exc:
                problems[field.name] = f"is not valid JSON: {exc}"
        else:
            spec[field.name] = raw
    if kind in ("python_tests", "code_tests") and spec.get("tests"):
        spec.pop("tests_field", None)  # fixed tests typed in: they replace the column
    return spec, problems


def _display(field: SpecField, value) -> str:
    widget = widget_for(field)
    if value is None:
        return ""
    if widget == "lines":
        return "\n".join(map(str, value))
    if widget == "tests":
        return "\n\n".join(value) if isinstance(value, list) else str(value)
    if widget == "json":
        return json.dumps(value, indent=2)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def builder_sections(
    *,
    chosen: str,
    spec: dict | None,
    errors: dict[str, list[str]],
    suggestions: dict[str, list[str]] | None = None,
) -> list[dict]:
    """One section per type with its inputs: values from `spec` for the chosen type, defaults elsewhere.

    ``suggestions``: values offered for a text input by field name (the team's secret names for a judge's
    api_key_secret, its deployments for deployment), shown as a pick list the user may still type past.
    """
    suggestions = suggestions or {}
    sections = []
    for kind, cls in VERIFIER_TYPES.items():
        source = spec if spec and spec.get("type") == kind else {}
        defaults = {f.name: source.get(f.name, None if f.required else f.default) for f in cls.fields}
        inputs = []
        for field in cls.fields:
            value = source.get(field.name, None if field.required else field.default)
            controller, wanted = SHOWN_WHEN.get(field.name, (None, None))
            if controller not in defaults:
                controller = None
            inputs.append(
                {
                    "name": field.name,
                    "input_name": input_name(kind, field),
                    "dom_id": f"field-{field.name}" if kind == chosen else f"field-{kind}-{field.name}",
                    "input_id": f"id-{kind}-{field.name}",
                    "label": field.name.replace("_", " ").capitalize(),
                    "widget": widget_for(field),
                    "help": field.help,
                    "required": field.required,
                    "choices": [str(choice) for choice in field.choices],
                    "value": _display(field, value),
                    "checked": bool(value) if widget_for(field) == "checkbox" else False,
                    "errors": errors.get(field.name, []) if kind == chosen else [],
                    "suggestions": suggestions.get(field.name, []) if widget_for(field) == "text" else [],
                    "column": names_a_column(field),
                    "shown_when": f"{controller}={wanted}" if controller else "",
                    "hidden": bool(controller) and str(defaults[controller]) != wanted,
                }
            )
        sections.append({"type": kind, "summary": cls.summary, "inputs": inputs, "chosen": kind == chosen})
    return sections
