"""json: the completion holds JSON that parses, fits a JSON Schema and whose chosen fields equal the row's."""

from __future__ import annotations

import json

import jsonschema

from gpu_jobs.rewards.base import Scorer, ScoreResult, SpecError, SpecField, shorten
from gpu_jobs.rewards.extract import json_path, last_json_object

SCORING_MODES = ("all_or_nothing", "fraction")


class JsonCheck(Scorer):
    type_name = "json"
    summary = "JSON: the answer parses as JSON, fits a schema, and chosen fields equal the reference's"
    example = {
        "type": "json",
        "schema": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}},
        "reference_field": "answer",
        "compare_fields": ["city"],
    }
    fields = (
        SpecField("schema", (dict,), default=None, help="A JSON Schema the answer must satisfy (optional)."),
        SpecField(
            "reference_field",
            (str,),
            default=None,
            help="A column holding the expected JSON (an object or its text); needed for compare_fields.",
        ),
        SpecField(
            "compare_fields",
            (list,),
            default=None,
            help="Fields (dotted paths such as address.city) that must equal the reference's.",
        ),
        SpecField(
            "scoring",
            (str,),
            default="all_or_nothing",
            choices=SCORING_MODES,
            help="all_or_nothing: 1 only when every check passes; fraction: the share of compared fields equal.",
        ),
    )

    @classmethod
    def normalise_spec(cls, spec: dict) -> dict:
        clean = super().normalise_spec(spec)
        if clean["schema"] is not None:
            try:
                jsonschema.validators.validator_for(clean["schema"]).check_schema(clean["schema"])
            except jsonschema.SchemaError as exc:
                raise SpecError(
                    "schema", f"is not a valid JSON Schema: {shorten(exc.message, 160)}"
                ) from None
        fields = clean["compare_fields"]
        if fields is not None:
            if not fields or not all(isinstance(name, str) and name.strip() for name in fields):
                raise SpecError("compare_fields", "must be a non-empty list of field names")
            if clean["reference_field"] is None:
                raise SpecError("reference_field", "name the column with the expected JSON to compare fields")
        return clean

    def _score(self, row: dict, completion: str) -> ScoreResult:
        value = last_json_object(completion)
        if value is None:
            return ScoreResult(0.0, {"parses": 0.0}, "no JSON found in the completion")
        parts = {"parses": 1.0}
        if self.spec["schema"] is not None:
            error = jsonschema.exceptions.best_match(
                jsonschema.validators.validator_for(self.spec["schema"])(self.spec["schema"]).iter_errors(
                    value
                )
            )
            parts["schema"] = 0.0 if error else 1.0
            if error:
                where = "/".join(map(str, error.absolute_path)) or "the top level"
                return ScoreResult(
                    0.0, parts, f"JSON does not fit the schema at {where}: {shorten(error.message, 120)}"
                )
        names = self.spec["compare_fields"]
        if not names:
            return ScoreResult(
                1.0, parts, "valid JSON" + (" that fits the schema" if "schema" in parts else "")
            )
        field = self.spec["reference_field"]
        reference = row.get(field)
        if isinstance(reference, str):
            try:
                reference = json.loads(reference)
            except ValueError:
                return ScoreResult(0.0, parts, f"row's {field!r} is not JSON")
        if reference is None:
            return ScoreResult(0.0, parts, f"row has no {field!r} value to compare with")
        wrong = [
            name
            for name in names
            if json_path(value, name) != json_path(reference, name) or json_path(value, name) is None
        ]
        parts["fields"] = (len(names) - len(wrong)) / len(names)
        if self.spec["scoring"] == "fraction":
            score = parts["fields"]
        else:
            score = 0.0 if wrong else 1.0
        if not wrong:
            return ScoreResult(score, parts, f"all {len(names)} compared field(s) equal")
        first = wrong[0]
        return ScoreResult(
            score,
            parts,
            f"{len(wrong)}/{len(names)} field(s) differ; {first}: expected "
            f"{shorten(json.dumps(json_path(reference, first)), 60)}, got {shorten(json.dumps(json_path(value, first)), 60)}",
        )
