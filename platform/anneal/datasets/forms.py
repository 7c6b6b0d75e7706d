from django import forms

from anneal.datasets.services import SUPPORTED_SUFFIXES


class UploadForm(forms.Form):
    name = forms.CharField(
        max_length=200,
        label="Dataset name",
        help_text="Uploading again under an existing name adds a new version of that dataset.",
    )
    file = forms.FileField(
        help_text="JSON Lines: one JSON object per line (" + ", ".join(SUPPORTED_SUFFIXES) + ").",
        widget=forms.ClearableFileInput(attrs={"accept": ",".join(SUPPORTED_SUFFIXES)}),
    )
    prompt_field = forms.CharField(
        max_length=200,
        initial="prompt",
        label="Prompt column",
        help_text="The key of each object that holds the prompt the model answers.",
    )
    answer_field = forms.CharField(
        max_length=200,
        initial="answer",
        required=False,
        label="Answer column",
        help_text="The key holding the reference answer (optional). Other keys are kept for verifiers to read.",
    )

    # Where the service's field names land on this form.
    SERVICE_FIELDS = {
        "mapping.prompt": "prompt_field",
        "mapping.answer": "answer_field",
        "mapping": "prompt_field",
    }

    def mapping(self) -> dict[str, str]:
        return {"prompt": self.cleaned_data["prompt_field"], "answer": self.cleaned_data["answer_field"]}
