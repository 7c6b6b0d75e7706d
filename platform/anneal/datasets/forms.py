from django import forms

from anneal.datasets.pack_catalogue import MAX_DIFFICULTY, MAX_PACK_ROWS
from anneal.datasets.services import ACCEPTED_NAMES

ROLE_HELP = {
    "prompt_field": "The column the model answers: text, or chat messages (a list of {role, content}).",
    "answer_field": "The reference answer verifiers compare with (optional); a row with it empty is an error "
    "unless it has tests.",
    "tests_field": "Tests for python_tests verifiers (optional): assert scripts, or JSON {stdin, stdout} and "
    "{call, args, expected} tests, one or a list; each must parse.",
    "domain_field": "Groups rows for statistics and multi-domain jobs (optional).",
    "difficulty_field": "A number or a short label (optional).",
}


class UploadForm(forms.Form):
    name = forms.CharField(
        max_length=200,
        label="Dataset name",
        help_text="Uploading again under an existing name adds a new version of that dataset.",
    )
    file = forms.FileField(
        help_text="JSON Lines, CSV or Parquet, each optionally gzip-compressed (.gz).",
        widget=forms.ClearableFileInput(attrs={"accept": ",".join(ACCEPTED_NAMES)}),
    )
    map_later = forms.BooleanField(
        required=False,
        initial=True,
        label="Show me the first rows, then choose the columns",
        help_text="Unticked: the columns below are used and validation starts at once.",
    )
    prompt_field = forms.CharField(max_length=200, initial="prompt", required=False, label="Prompt column")
    answer_field = forms.CharField(max_length=200, initial="answer", required=False, label="Answer column")

    # Where the service's field names land on this form.
    SERVICE_FIELDS = {
        "mapping.prompt": "prompt_field",
        "mapping.answer": "answer_field",
        "mapping": "prompt_field",
    }

    def mapping(self) -> dict | None:
        if self.cleaned_data["map_later"]:
            return None
        return {"prompt": self.cleaned_data["prompt_field"], "answer": self.cleaned_data["answer_field"]}


class MappingForm(forms.Form):
    """Choose which column plays each role; the choices are the columns seen in the file."""

    prompt_field = forms.ChoiceField(label="Prompt", help_text=ROLE_HELP["prompt_field"])
    prompt_format = forms.ChoiceField(
        choices=[("auto", "detect"), ("text", "plain text"), ("chat", "chat messages")],
        initial="auto",
        label="Prompt format",
    )
    answer_field = forms.ChoiceField(
        required=False, label="Reference answer", help_text=ROLE_HELP["answer_field"]
    )
    tests_field = forms.ChoiceField(required=False, label="Tests", help_text=ROLE_HELP["tests_field"])
    domain_field = forms.ChoiceField(required=False, label="Domain", help_text=ROLE_HELP["domain_field"])
    difficulty_field = forms.ChoiceField(
        required=False, label="Difficulty", help_text=ROLE_HELP["difficulty_field"]
    )
    metadata = forms.MultipleChoiceField(
        required=False,
        label="Metadata columns to keep",
        help_text="None ticked keeps every other column (verifiers may read them).",
        widget=forms.CheckboxSelectMultiple,
    )
    tokenizer = forms.CharField(
        initial="tiny",
        label="Tokenizer for statistics",
        help_text="'tiny' (the platform's model) or the name of a model folder in the model store.",
    )

    SERVICE_FIELDS = {
        "mapping.prompt": "prompt_field",
        "mapping.answer": "answer_field",
        "mapping.tests": "tests_field",
        "mapping.domain": "domain_field",
        "mapping.difficulty": "difficulty_field",
        "mapping.prompt_format": "prompt_format",
        "mapping.metadata": "metadata",
        "mapping": "prompt_field",
    }

    def __init__(self, *args, columns: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        optional = [("", "— none —")] + [(c, c) for c in columns]
        self.fields["prompt_field"].choices = [(c, c) for c in columns]
        for name in ("answer_field", "tests_field", "domain_field", "difficulty_field"):
            self.fields[name].choices = optional
        self.fields["metadata"].choices = [(c, c) for c in columns]
        # Guess the obvious: a column named like the role.
        guesses = {
            "prompt_field": ("prompt", "question", "messages", "input", "problem"),
            "answer_field": ("answer", "solution", "reference", "output", "target"),
            "tests_field": ("tests", "test", "test_cases"),
            "domain_field": ("domain", "task", "category", "topic"),
            "difficulty_field": ("difficulty", "level"),
        }
        for name, candidates in guesses.items():
            hit = next((c for c in candidates if c in columns), None)
            if hit and name not in self.initial:
                self.initial[name] = hit

    def mapping(self) -> dict:
        data = self.cleaned_data
        return {
            "prompt": data["prompt_field"],
            "answer": data["answer_field"],
            "tests": data["tests_field"],
            "domain": data["domain_field"],
            "difficulty": data["difficulty_field"],
            "prompt_format": data["prompt_format"],
            "metadata": list(data["metadata"]) or None,
        }


class SplitForm(forms.Form):
    method = forms.ChoiceField(
        choices=[("seed", "random, by seed"), ("column", "by a column's values")],
        widget=forms.RadioSelect,
        initial="seed",
    )
    eval_fraction = forms.FloatField(initial=0.1, required=False, label="Eval fraction", help_text="e.g. 0.1")
    seed = forms.IntegerField(initial=0, min_value=0, required=False)
    column = forms.CharField(required=False, help_text="The column whose value decides the split.")
    eval_values = forms.CharField(
        required=False,
        label="Eval values",
        help_text="Comma-separated values of that column that go to eval.",
    )

    def params(self) -> dict:
        data = self.cleaned_data
        return {
            "method": data["method"],
            "eval_fraction": data["eval_fraction"] if data["eval_fraction"] is not None else 0.1,
            "seed": data["seed"] or 0,
            "column": data["column"].strip(),
            "eval_values": [v.strip() for v in data["eval_values"].split(",") if v.strip()],
        }


class PackForm(forms.Form):
    name = forms.CharField(
        max_length=200, label="Dataset name", help_text="Verifiers are named <name>/<task>."
    )
    tasks = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple, help_text="One domain per task.")
    size = forms.IntegerField(
        initial=100,
        min_value=1,
        max_value=MAX_PACK_ROWS,
        label="Rows per task",
        help_text=f"At most {MAX_PACK_ROWS} in all.",
    )
    difficulty = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_DIFFICULTY,
        help_text=f"0 (easiest) to {MAX_DIFFICULTY}, for tasks with a curriculum; empty: the generator's defaults.",
    )
    seed = forms.IntegerField(initial=0, min_value=0)

    def __init__(self, *args, tasks: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["tasks"].choices = [(t, t) for t in tasks]
