"""The launch form: a dataset version, verifiers with weights, and the engine's settings with their help."""

import dataclasses

from django import forms

from anneal.datasets.models import DatasetVersion
from anneal.training.services import HYPER_FIELDS, hyper_defaults
from anneal.verifiers.models import Verifier, VerifierVersion
from gpu_jobs.config import LOSS_TYPES, GRPOJobConfig

# Settings whose values come from a fixed list: a select instead of a text box.
SETTING_CHOICES = {"loss_type": LOSS_TYPES}


class DatasetVersionChoice(forms.ModelChoiceField):
    def label_from_instance(self, obj: DatasetVersion) -> str:
        return f"{obj.dataset.name} v{obj.number} ({obj.row_count} rows)"


def _setting_field(name: str, default: object, help_text: str) -> forms.Field:
    """An input for one engine setting; left empty it means the engine's default (shown as the placeholder)."""
    options = {
        "required": False,
        "initial": default,
        "label": name.replace("_", " ").capitalize(),
        "help_text": help_text,
    }
    if name in SETTING_CHOICES:
        return forms.ChoiceField(choices=[(value, value) for value in SETTING_CHOICES[name]], **options)
    if isinstance(default, bool):
        return forms.BooleanField(**options)
    placeholder = {"placeholder": str(default)}
    if isinstance(default, int):
        return forms.IntegerField(widget=forms.NumberInput(attrs=placeholder), **options)
    if isinstance(default, float):
        return forms.FloatField(widget=forms.NumberInput(attrs={**placeholder, "step": "any"}), **options)
    return forms.CharField(max_length=500, widget=forms.TextInput(attrs=placeholder), **options)


class LaunchForm(forms.Form):
    name = forms.CharField(
        max_length=200, required=False, help_text="Shown in lists; 'untitled job' when empty."
    )
    dataset_version = DatasetVersionChoice(
        queryset=DatasetVersion.objects.none(), label="Dataset version", empty_label=None
    )
    # Carries the errors about the verifier choice as a whole, shown in the verifiers section.
    verifiers = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, team, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["dataset_version"].queryset = (
            DatasetVersion.objects.filter(dataset__team=team)
            .select_related("dataset")
            .order_by("dataset__name", "-number")
        )
        # A job uses each verifier's latest version; older versions stay reproducible through old jobs.
        self.verifier_versions: list[VerifierVersion] = []
        for verifier in Verifier.objects.filter(team=team).order_by("name").prefetch_related("versions"):
            latest = max(verifier.versions.all(), key=lambda v: v.number, default=None)
            if latest is not None:
                latest.verifier = verifier
                self.verifier_versions.append(latest)
        for version in self.verifier_versions:
            self.fields[f"use_{version.pk}"] = forms.BooleanField(required=False, label=version.verifier.name)
            self.fields[f"weight_{version.pk}"] = forms.FloatField(
                required=False, initial=1.0, min_value=0, label=f"Weight of {version.verifier.name}"
            )
        helps = {f.name: f.metadata.get("help", "") for f in dataclasses.fields(GRPOJobConfig)}
        defaults = hyper_defaults()
        self.setting_names = [name for name in HYPER_FIELDS if name in defaults]
        for name in self.setting_names:
            self.fields[f"p_{name}"] = _setting_field(name, defaults[name], helps.get(name, ""))
        self._chosen: list[VerifierVersion] = []

    def verifier_rows(self) -> list[tuple[VerifierVersion, forms.BoundField, forms.BoundField]]:
        return [(v, self[f"use_{v.pk}"], self[f"weight_{v.pk}"]) for v in self.verifier_versions]

    def setting_fields(self) -> list[tuple[str, forms.BoundField]]:
        return [(name, self[f"p_{name}"]) for name in self.setting_names]

    def launch_arguments(self) -> dict:
        """Keyword arguments for ``job_launch`` (all but team and user); the form must be valid."""
        data = self.cleaned_data
        self._chosen = [v for v in self.verifier_versions if data.get(f"use_{v.pk}")]
        verifiers = []
        for version in self._chosen:
            weight = data.get(f"weight_{version.pk}")
            verifiers.append({"verifier_version": version.pk, "weight": 1.0 if weight is None else weight})
        return {
            "name": data["name"],
            "dataset_version_id": data["dataset_version"].pk,
            "verifiers": verifiers,
            "params": {
                name: data[f"p_{name}"]
                for name in self.setting_names
                if data.get(f"p_{name}") not in (None, "")
            },
        }

    def service_fields(self) -> dict[str, str]:
        """Where the service's error names land: ``params.max_steps`` -> that setting's input, and so on."""
        out = {f"params.{name}": f"p_{name}" for name in self.setting_names}
        for index, version in enumerate(self._chosen):
            out[f"verifiers[{index}].weight"] = f"weight_{version.pk}"
            out[f"verifiers[{index}].verifier_version"] = "verifiers"
        return out
