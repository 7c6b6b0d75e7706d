"""The launch form: a dataset version, verifiers with weights, and the engine's settings with their help, laid
out for a domain expert by anneal.training.launch_layout (essentials first, the rest under Advanced)."""

from dataclasses import fields as dataclass_fields

from django import forms

from anneal import jsontext
from anneal.datasets.models import DatasetVersion
from anneal.training import launch_layout
from anneal.training.limits import LIMIT_FIELDS, limit_defaults, limit_helps
from anneal.training.spec import available_models
from anneal.verifiers.models import Verifier, VerifierVersion
from gpu_jobs.spec import TrainingSettings, setting_fields

# The user's settings (gpu_jobs.spec.TrainingSettings): one input each, in the dataclass's order.
SETTINGS = {entry["name"]: entry for entry in setting_fields()}
# Settings whose values come from a fixed list (the "choices" in the settings' metadata): a select.
SETTING_CHOICES = {name: tuple(entry["choices"]) for name, entry in SETTINGS.items() if "choices" in entry}
# A group a setting's metadata names for the form (a field added later may say where it belongs).
METADATA_GROUPS = {f.name: f.metadata.get("group") for f in dataclass_fields(TrainingSettings)}


class DatasetVersionChoice(forms.ModelChoiceField):
    def label_from_instance(self, obj: DatasetVersion) -> str:
        return f"{obj.dataset.name} v{obj.number} ({obj.row_count} rows)"


class DatasetVersionMultiChoice(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj: DatasetVersion) -> str:
        return f"{obj.dataset.name} v{obj.number} ({obj.row_count} rows)"


def _setting_field(name: str, default: object, help_text: str) -> forms.Field:
    """An input for one engine setting; left empty it means the engine's default (shown as the placeholder)."""
    options = {
        "required": False,
        "initial": default,
        "label": launch_layout.LABELS.get(name) or name.replace("_", " ").capitalize(),
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
    extra_dataset_versions = DatasetVersionMultiChoice(
        queryset=DatasetVersion.objects.none(),
        required=False,
        label="Also train on",
        help_text="More dataset versions whose rows join the first one's; each row keeps its domain. "
        "Choose several with Ctrl-click (⌘-click on a Mac); none is fine.",
    )
    domain_weights = forms.CharField(
        required=False,
        label="Domain weights",
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "arithmetic = 0.7\ncode = 0.3"}),
        help_text='Share of the prompts per domain, one "domain = weight" a line, summing to 1 and naming '
        'every domain of the data ("all" for rows without one). Empty: equal shares.',
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
        self.fields["extra_dataset_versions"].queryset = self.fields["dataset_version"].queryset
        if not self.is_bound and not self.initial.get("dataset_version"):
            # The team's newest version: most likely the data just uploaded, rather than the first by name.
            newest = DatasetVersion.objects.filter(dataset__team=team).order_by("-created_at", "-pk").first()
            self.initial["dataset_version"] = newest.pk if newest else None
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
            self.fields[f"domains_{version.pk}"] = forms.CharField(
                required=False,
                max_length=2000,
                label=f"Domains of {version.verifier.name}",
                widget=forms.TextInput(attrs={"placeholder": "every domain"}),
            )
        # The engine's settings, then scheduling and cost (priority, devices, budget, time limit).
        helps = {name: entry["help"] for name, entry in SETTINGS.items()} | limit_helps()
        helps |= launch_layout.PLAIN_HELP
        defaults = {name: entry["default"] for name, entry in SETTINGS.items()} | limit_defaults()
        self.setting_names = [*SETTINGS, *LIMIT_FIELDS]
        for name in self.setting_names:
            self.fields[f"p_{name}"] = _setting_field(name, defaults[name], helps.get(name, ""))
        if "p_model" in self.fields:
            # The model store's models (the API also takes a folder path or, where allowed, a hub id).
            models = available_models()
            self.fields["p_model"] = forms.ChoiceField(
                choices=[
                    (m["name"], m["name"] + ("" if m["ready"] else " (built on first use)")) for m in models
                ],
                required=False,
                initial=defaults["model"],
                label=launch_layout.LABELS["model"],
                help_text=helps.get("model", ""),
            )
        self._weight_names: list[str] = []
        self._chosen: list[VerifierVersion] = []
        if "p_environment" in self.fields:
            # Agent jobs (gpu_jobs.agent.spec): a JSON object; empty for a single-turn job.
            self.fields["p_environment"] = forms.CharField(
                required=False,
                max_length=8000,
                label="Environment (agent jobs)",
                help_text=helps.get("environment", ""),
                widget=forms.Textarea(
                    attrs={
                        "rows": 3,
                        "placeholder": '{"name": "repo_tests", "max_turns": 6, "token_budget": 384}',
                    }
                ),
            )

    def clean_p_environment(self) -> dict | None:
        text = (self.cleaned_data.get("p_environment") or "").strip()
        if not text:
            return None
        try:
            value = jsontext.loads(text)
        except ValueError as error:
            raise forms.ValidationError(f"not valid JSON: {error}") from None
        if not isinstance(value, dict):
            raise forms.ValidationError('write a JSON object such as {"name": "repo_tests"}')
        return value

    def verifier_rows(
        self,
    ) -> list[tuple[VerifierVersion, forms.BoundField, forms.BoundField, forms.BoundField]]:
        return [
            (v, self[f"use_{v.pk}"], self[f"weight_{v.pk}"], self[f"domains_{v.pk}"])
            for v in self.verifier_versions
        ]

    def clean_domain_weights(self) -> dict[str, float]:
        """ "domain = weight" lines (or a JSON object) -> {domain: weight}; the service checks the values."""
        text = (self.cleaned_data.get("domain_weights") or "").strip()
        if not text:
            return {}
        if text.startswith("{"):
            try:
                parsed = jsontext.loads(text)
            except ValueError as error:
                raise forms.ValidationError(f"not valid JSON: {error}") from None
            if not isinstance(parsed, dict):
                raise forms.ValidationError("write an object {domain: weight}")
            return parsed
        out: dict[str, float] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            name, sep, value = line.replace(":", "=", 1).partition("=")
            if not sep or not name.strip():
                raise forms.ValidationError(f'line {number}: write "domain = weight", got {line.strip()!r}')
            try:
                out[name.strip()] = float(value)
            except ValueError:
                raise forms.ValidationError(f"line {number}: {value.strip()!r} is not a number") from None
        return out

    def setting_fields(self) -> list[tuple[str, forms.BoundField]]:
        return [(name, self[f"p_{name}"]) for name in self.setting_names]

    def essential_settings(self) -> list[tuple[str, forms.BoundField, str]]:
        """(name, field, glossary anchor) of the settings shown up front."""
        names = [name for name in launch_layout.ESSENTIALS if name in self.setting_names]
        return [(name, self[f"p_{name}"], launch_layout.GLOSSARY.get(name, "")) for name in names]

    def advanced_groups(self) -> list[tuple[str, list[tuple[str, forms.BoundField, str]]]]:
        """The other settings by group, in the layout's order: (title, [(name, field, glossary anchor)])."""
        groups: dict[str, list[tuple[str, forms.BoundField, str]]] = {
            t: [] for t in launch_layout.group_order()
        }
        for name in self.setting_names:
            if name in launch_layout.ESSENTIALS:
                continue
            title = launch_layout.group_of(name, METADATA_GROUPS.get(name))
            entry = (name, self[f"p_{name}"], launch_layout.GLOSSARY.get(name, ""))
            groups.setdefault(title, []).append(entry)
        return [(title, entries) for title, entries in groups.items() if entries]

    def launch_arguments(self) -> dict:
        """Keyword arguments for ``job_launch`` (all but team and user); the form must be valid."""
        data = self.cleaned_data
        self._chosen = [v for v in self.verifier_versions if data.get(f"use_{v.pk}")]
        verifiers = []
        for version in self._chosen:
            weight = data.get(f"weight_{version.pk}")
            domains = [d.strip() for d in (data.get(f"domains_{version.pk}") or "").split(",") if d.strip()]
            verifiers.append(
                {
                    "verifier_version": version.pk,
                    "weight": 1.0 if weight is None else weight,
                    **({"domains": domains} if domains else {}),
                }
            )
        extra = [v for v in data.get("extra_dataset_versions") or [] if v.pk != data["dataset_version"].pk]
        self._weight_names = list(data.get("domain_weights") or {})
        return {
            "name": data["name"],
            "dataset_version_id": data["dataset_version"].pk,
            "dataset_version_ids": [data["dataset_version"].pk] + [v.pk for v in extra] if extra else None,
            "domain_weights": data.get("domain_weights") or {},
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
            out[f"verifiers[{index}].domains"] = f"domains_{version.pk}"
        out.update({f"domain_weights.{name}": "domain_weights" for name in self._weight_names})
        out["dataset_versions[0]"] = "dataset_version"
        out.update({f"dataset_versions[{i}]": "extra_dataset_versions" for i in range(1, 100)})
        return out
