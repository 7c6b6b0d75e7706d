"""The verifier form: a name, a type and the spec the builder's inputs (or its script) make."""

from django import forms

from anneal import jsontext
from anneal.errors import InputError
from anneal.verifiers.builder import spec_from_inputs
from gpu_jobs.rewards import VERIFIER_TYPES


class VerifierForm(forms.Form):
    name = forms.CharField(max_length=200, help_text="Unique in the team; jobs show rewards under this name.")
    type = forms.ChoiceField(
        choices=[(name, cls.summary or name) for name, cls in VERIFIER_TYPES.items()],
        initial="exact_match",
        label="Verifier type",
    )
    # Written by the page's script: the spec exactly as shown in "The spec it makes".
    spec_json = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, name_required: bool = True, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["name"].required = name_required
        self.spec_errors: dict[str, list[str]] = {}

    def built_spec(self) -> dict:
        """The spec from the script's JSON when sent, else from the inputs; InputError naming the field."""
        kind = self.cleaned_data["type"]
        raw = (self.cleaned_data.get("spec_json") or "").strip()
        if raw:
            try:
                spec = jsontext.loads(raw)
            except ValueError as exc:
                raise InputError(f"is not valid JSON: {exc}", field="spec") from None
            if not isinstance(spec, dict):
                raise InputError("must be a JSON object with a 'type'", field="spec")
            if spec.get("type") != kind:
                spec = {**spec, "type": kind}
            return spec
        spec, problems = spec_from_inputs(kind, self.data)
        if problems:
            raise InputError(
                [{"field": f"spec.{name}", "message": message} for name, message in problems.items()]
            )
        return spec

    def show_spec_errors(self, exc: InputError) -> None:
        """Put each `spec.<field>` error next to that input; anything else above the form."""
        for error in exc.errors:
            name, message = error.get("field", ""), error.get("message", "")
            if name == "spec.type":
                self.add_error("type", message)
            elif name == "name":
                self.add_error("name", message)
            elif name.startswith("spec."):
                field = name[len("spec.") :].split(".")[0].split("[")[0]
                where = name[len("spec.") :]
                self.spec_errors.setdefault(field, []).append(
                    message if where == field else f"{where}: {message}"
                )
                self.add_error(None, f"{where}: {message}")
            else:
                self.add_error(None, f"{name}: {message}" if name and name != "non_field_errors" else message)
