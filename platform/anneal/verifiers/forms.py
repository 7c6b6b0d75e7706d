"""The verifier form builder: typed fields per verifier type, turned into the JSON spec gpu_jobs.rewards reads."""

from django import forms

from gpu_jobs.rewards import VERIFIER_TYPES

TYPE_LABELS = {
    "exact_match": "Exact match: compare the model's answer with a reference column",
    "python_tests": "Python tests: run the model's program against tests in a sandbox",
}
EXTRACT_CHOICES = [
    ("none", "The whole completion"),
    ("last_line", "The last non-empty line"),
    ("last_number", "The last number (1,234 and 57.0 count as numbers)"),
]
SCORING_CHOICES = [
    ("all_or_nothing", "1 when every test passes, else 0"),
    ("fraction", "The fraction of tests that pass"),
]
TESTS_SOURCE_CHOICES = [
    ("field", "Read the tests from a column of each row"),
    ("fixed", "Use the same tests for every row"),
]


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


class VerifierForm(forms.Form):
    name = forms.CharField(max_length=200, help_text="Unique in the team; jobs show rewards under this name.")
    type = forms.ChoiceField(
        choices=[(name, TYPE_LABELS.get(name, name)) for name in VERIFIER_TYPES],
        initial="exact_match",
        label="Verifier type",
    )
    # exact_match
    reference_field = forms.CharField(
        max_length=200,
        required=False,
        initial="answer",
        label="Reference column",
        help_text="The dataset column holding the right answer (the upload's answer column is stored as 'answer').",
    )
    extract = forms.ChoiceField(
        choices=EXTRACT_CHOICES,
        initial="none",
        label="Compare",
        help_text="Which part of the completion to compare.",
    )
    case_sensitive = forms.BooleanField(
        required=False, initial=False, help_text="'Paris' differs from 'paris'."
    )
    strip_whitespace = forms.BooleanField(
        required=False, initial=True, help_text="Ignore spaces and newlines around both answers."
    )
    # python_tests
    tests_source = forms.ChoiceField(
        choices=TESTS_SOURCE_CHOICES, initial="field", widget=forms.RadioSelect, label="Tests come from"
    )
    tests_field = forms.CharField(
        max_length=200,
        required=False,
        initial="tests",
        label="Tests column",
        help_text="The column holding a test (a string) or a list of tests for each row.",
    )
    tests = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 5, "spellcheck": "false", "placeholder": "assert result == 57"}),
        label="Tests",
        help_text="Python run after the program, in its namespace; `result` holds the value of the program's last "
        "expression. Separate tests with a blank line.",
    )
    scoring = forms.ChoiceField(choices=SCORING_CHOICES, initial="all_or_nothing", label="Score")
    timeout_s = forms.FloatField(
        required=False,
        initial=5,
        label="Time limit (seconds)",
        help_text="For the program and all its tests together, per sample. At most 60.",
    )

    TYPE_FIELDS = {
        "exact_match": ("reference_field", "extract", "case_sensitive", "strip_whitespace"),
        "python_tests": ("tests_source", "tests_field", "tests", "scoring", "timeout_s"),
    }

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Only the chosen type's fields matter: the other type's hidden inputs must not fail the form.
        chosen = self.data.get("type") if self.is_bound else None
        for kind, names in self.TYPE_FIELDS.items():
            if chosen and kind != chosen:
                for name in names:
                    self.fields[name].required = False

    def clean(self) -> dict:
        data = super().clean()
        kind = data.get("type")
        for other, names in self.TYPE_FIELDS.items():
            if other != kind:
                for name in names:
                    self._errors.pop(name, None)
                    data.pop(name, None)
        # Blank columns would pass the engine's type checks and then score 0 on every row: say so now.
        if kind == "exact_match" and not data.get("reference_field"):
            self.add_error("reference_field", "Name the column that holds the reference answer.")
        if kind == "python_tests":
            if data.get("tests_source") == "fixed" and not (data.get("tests") or "").strip():
                self.add_error("tests", "Write at least one test, e.g. assert result == 57")
            if data.get("tests_source") == "field" and not data.get("tests_field"):
                self.add_error("tests_field", "Name the column that holds each row's tests.")
        return data

    def service_fields(self) -> dict[str, str]:
        """Where the service's error names (``spec.timeout_s``) land on this form."""
        out = {f"spec.{name}": name for names in self.TYPE_FIELDS.values() for name in names}
        out["spec.type"] = "type"
        return out

    def spec(self) -> dict:
        """The JSON spec the cleaned form describes (defaults are filled in by the verifier engine)."""
        return spec_from(self.cleaned_data)

    def preview(self) -> dict:
        """The spec as the form stands, valid or not, for the page's preview."""
        values = self.data if self.is_bound else {name: field.initial for name, field in self.fields.items()}
        return spec_from(values)


def spec_from(values) -> dict:
    """The spec from form values: cleaned data, the raw POST (a checkbox sends "on" or nothing) or initials."""
    kind = values.get("type") or "exact_match"
    if kind == "exact_match":
        return {
            "type": kind,
            "reference_field": values.get("reference_field") or "",
            "case_sensitive": bool(values.get("case_sensitive")),
            "strip_whitespace": bool(values.get("strip_whitespace")),
            "extract": values.get("extract") or "none",
        }
    if kind == "python_tests":
        spec: dict = {"type": kind}
        if values.get("tests_source") == "fixed":
            spec["tests"] = _tests_blocks(values.get("tests") or "")
        else:
            spec["tests_field"] = values.get("tests_field") or ""
        spec["scoring"] = values.get("scoring") or "all_or_nothing"
        timeout = values.get("timeout_s")
        if timeout not in (None, ""):
            try:
                timeout = float(timeout)
            except (TypeError, ValueError):
                pass
            else:
                spec["timeout_s"] = int(timeout) if timeout.is_integer() else timeout
        return spec
    return {"type": kind}
