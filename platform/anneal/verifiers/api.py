"""REST for verifiers: list/create, detail/delete, versions, clone, validate, preview and the type catalogue."""

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from anneal.accounts.scope import acting_team
from anneal.api_base import TeamScopedView
from anneal.errors import InputError
from anneal.verifiers.models import Verifier, VerifierVersion
from anneal.verifiers.openai_import import verifier_import_openai
from anneal.verifiers.outbound import judge_spec_check
from anneal.verifiers.preview import PREVIEW_EXAMPLE, verifier_preview
from anneal.verifiers.selectors import verifier_type_catalogue, verifier_version_diff
from anneal.verifiers.services import (
    VerifierInUse,
    verifier_clone,
    verifier_create,
    verifier_delete,
    verifier_spec_check,
    verifier_test_cases_run,
    verifier_version_create,
)
from gpu_jobs.rewards import VERIFIER_TYPES


def _spec_help() -> str:
    lines = [
        "A verifier spec is a JSON object with a `type` and that type's fields; omitted fields take their "
        "defaults. A bad spec is answered 400 with the field named (`spec.<field>`).",
        "",
    ]
    for name, cls in VERIFIER_TYPES.items():
        fields = ", ".join(
            f"`{f.name}`" + ("" if f.required else f" (default {f.default!r})") for f in cls.fields
        )
        lines.append(f"* `{name}`: {cls.summary}. Fields: {fields}.")
    return "\n".join(lines)


SPEC_HELP = _spec_help()
SPEC_EXAMPLES = [
    OpenApiExample(name, value={"name": f"my {name} verifier", "spec": cls.example}, request_only=True)
    for name, cls in VERIFIER_TYPES.items()
]
VERSION_EXAMPLES = [
    OpenApiExample(name, value={"spec": cls.example}, request_only=True)
    for name, cls in VERIFIER_TYPES.items()
]


class VersionOutput(serializers.ModelSerializer):
    probe_flags = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = VerifierVersion
        fields = ["id", "number", "spec", "flagged", "probe_flags", "probe_results", "created_at"]


class VersionWithDiffOutput(VersionOutput):
    diff = serializers.SerializerMethodField()

    class Meta(VersionOutput.Meta):
        fields = [*VersionOutput.Meta.fields, "diff"]

    def get_diff(self, version) -> str:
        return verifier_version_diff(version=version)


class VerifierOutput(serializers.ModelSerializer):
    versions = VersionOutput(many=True, read_only=True)
    flagged = serializers.SerializerMethodField()

    class Meta:
        model = Verifier
        fields = ["id", "name", "created_at", "flagged", "versions"]

    def get_flagged(self, verifier) -> bool:
        """Whether the latest version scored a hack probe high."""
        latest = max(verifier.versions.all(), key=lambda v: v.number, default=None)
        return bool(latest and latest.flagged)


class SpecInput(serializers.Serializer):
    spec = serializers.JSONField(help_text=SPEC_HELP)


class VerifierCreateInput(SpecInput):
    name = serializers.CharField(max_length=200)


class VerifierCloneInput(serializers.Serializer):
    name = serializers.CharField(max_length=200)


class PreviewSample(serializers.Serializer):
    row = serializers.DictField()
    completion = serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=100_000)


class PreviewInput(SpecInput):
    samples = serializers.ListField(child=serializers.DictField(), min_length=1, max_length=100)


class PreviewResult(serializers.Serializer):
    score = serializers.FloatField()
    parts = serializers.DictField(child=serializers.FloatField())
    reason = serializers.CharField()


class PreviewOutput(serializers.Serializer):
    results = PreviewResult(many=True)


class ValidateOutput(serializers.Serializer):
    ok = serializers.BooleanField()
    spec = serializers.JSONField(allow_null=True)
    errors = serializers.ListField(child=serializers.DictField())


class SpecFieldOutput(serializers.Serializer):
    name = serializers.CharField()
    kinds = serializers.ListField(child=serializers.CharField())
    required = serializers.BooleanField()
    default = serializers.JSONField(allow_null=True)
    choices = serializers.ListField(child=serializers.JSONField())
    help = serializers.CharField()


class VerifierTypeOutput(serializers.Serializer):
    type = serializers.CharField()
    summary = serializers.CharField()
    example = serializers.JSONField()
    fields = SpecFieldOutput(many=True)


class VerifierListApi(TeamScopedView):
    Input = VerifierCreateInput

    @extend_schema(responses=VerifierOutput(many=True))
    def get(self, request):
        verifiers = Verifier.objects.filter(team__in=self.teams()).prefetch_related("versions")
        return Response(VerifierOutput(verifiers, many=True).data)

    @extend_schema(
        request=Input,
        responses={201: VerifierOutput},
        examples=SPEC_EXAMPLES,
        description="Create a verifier; its spec becomes version 1 and the hack probes run on it.\n\n"
        + SPEC_HELP,
    )
    def post(self, request):
        team = self.writable_team()
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        verifier = verifier_create(team=team, user=request.user, **data.validated_data)
        return Response(VerifierOutput(verifier).data, status=status.HTTP_201_CREATED)


class VerifierDetailApi(TeamScopedView):
    @extend_schema(responses=VerifierOutput)
    def get(self, request, pk: int):
        return Response(VerifierOutput(self.get_scoped(Verifier.objects.all(), pk)).data)

    @extend_schema(responses={204: None}, description="Delete a verifier no job used (409 otherwise).")
    def delete(self, request, pk: int):
        verifier = self.get_scoped(Verifier.objects.all(), pk)
        self.check_write(verifier.team)
        try:
            verifier_delete(verifier=verifier, user=request.user)
        except VerifierInUse as exc:
            return Response({"detail": str(exc), "errors": exc.errors}, status=status.HTTP_409_CONFLICT)
        return Response(status=status.HTTP_204_NO_CONTENT)


class VerifierVersionCreateApi(TeamScopedView):
    @extend_schema(
        responses=VersionWithDiffOutput(many=True),
        description="Versions, newest first, each with a diff to the one before.",
    )
    def get(self, request, pk: int):
        verifier = self.get_scoped(Verifier.objects.all(), pk)
        return Response(VersionWithDiffOutput(verifier.versions.order_by("-number"), many=True).data)

    @extend_schema(request=SpecInput, responses={201: VersionWithDiffOutput}, examples=VERSION_EXAMPLES)
    def post(self, request, pk: int):
        verifier = self.get_scoped(Verifier.objects.all(), pk)
        self.check_write(verifier.team)
        data = SpecInput(data=request.data)
        data.is_valid(raise_exception=True)
        version = verifier_version_create(
            verifier=verifier, user=request.user, spec=data.validated_data["spec"]
        )
        return Response(VersionWithDiffOutput(version).data, status=status.HTTP_201_CREATED)


class VerifierCloneApi(TeamScopedView):
    Input = VerifierCloneInput

    @extend_schema(
        request=Input,
        responses={201: VerifierOutput},
        description="Copy the latest spec into a new verifier.",
    )
    def post(self, request, pk: int):
        verifier = self.get_scoped(Verifier.objects.all(), pk)
        self.check_write(verifier.team)
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        clone = verifier_clone(verifier=verifier, user=request.user, name=data.validated_data["name"])
        return Response(VerifierOutput(clone).data, status=status.HTTP_201_CREATED)


class VerifierValidateApi(TeamScopedView):
    Output = ValidateOutput

    @extend_schema(
        request=SpecInput,
        responses=Output,
        examples=VERSION_EXAMPLES,
        description="Check a spec as the user types: always 200, with the normalised spec or the errors.",
    )
    def post(self, request):
        spec = request.data.get("spec") if isinstance(request.data, dict) else None
        try:
            clean = verifier_spec_check(spec)
            # Names a secret, deployment or host the team lacks: said as the user types, not only on save.
            judge_spec_check(clean, team=acting_team(request))
        except InputError as exc:
            return Response({"ok": False, "spec": None, "errors": exc.errors})
        return Response({"ok": True, "spec": clean, "errors": []})


class VerifierPreviewApi(TeamScopedView):
    Sample = PreviewSample
    Input = PreviewInput
    Output = PreviewOutput

    @extend_schema(
        request=Input,
        responses=Output,
        examples=[
            OpenApiExample("preview", value=PREVIEW_EXAMPLE, request_only=True),
            *[
                OpenApiExample(
                    name,
                    value={"spec": cls.example, "samples": PREVIEW_EXAMPLE["samples"]},
                    request_only=True,
                )
                for name, cls in VERIFIER_TYPES.items()
            ],
        ],
        description="Score completions with a spec without saving it: one result per sample, in order. "
        "A sample the verifier cannot score gets 0 with the reason. Owners and experts only (403 for a "
        "viewer); 429 with Retry-After past the user's previews per minute or when the team's sandbox quota "
        "has no room.\n\n" + SPEC_HELP,
    )
    def post(self, request):
        # A preview runs code and may call out on the team's quota: a viewer, who only looks, may not.
        team = self.writable_team()
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        samples = []
        for index, sample in enumerate(data.validated_data["samples"]):
            one = self.Sample(data=sample)
            if not one.is_valid():
                field, messages = next(iter(one.errors.items()))
                raise InputError(str(messages[0]), field=f"samples[{index}].{field}")
            samples.append(one.validated_data)
        results = verifier_preview(
            team=team, user=request.user, spec=data.validated_data["spec"], samples=samples
        )
        return Response({"results": [result.to_dict() for result in results]})


class VerifierTypesApi(TeamScopedView):
    @extend_schema(
        responses=VerifierTypeOutput(many=True),
        description="Every verifier type: summary, example spec and fields with help, defaults, choices.",
    )
    def get(self, request):
        return Response(verifier_type_catalogue())


class VerifierTestCasesApi(TeamScopedView):
    class Output(serializers.Serializer):
        id = serializers.IntegerField(source="case.id")
        row = serializers.JSONField(source="case.row")
        completion = serializers.CharField(source="case.completion")
        expected_pass = serializers.BooleanField(source="case.expected_pass")
        note = serializers.CharField(source="case.note")
        source_job = serializers.IntegerField(source="case.source_job_id", allow_null=True)
        source_seq = serializers.IntegerField(source="case.source_seq", allow_null=True)
        score = serializers.FloatField(help_text="What the latest version scores the completion.")
        reason = serializers.CharField()
        ok = serializers.BooleanField(help_text="Whether the latest version agrees with the expert.")

    @extend_schema(
        responses=Output(many=True),
        description="The verifier's test cases (flagged rollouts), each scored by its latest version.",
    )
    def get(self, request, pk: int):
        verifier = self.get_scoped(Verifier.objects.all(), pk)
        results = verifier_test_cases_run(version=verifier.latest_version)
        return Response(self.Output(results, many=True).data)


class VerifierImportInput(serializers.Serializer):
    grader = serializers.JSONField(
        help_text="An OpenAI fine-tuning grader: string_check, text_similarity, score_model, python or multi."
    )
    name = serializers.CharField(
        max_length=200, required=False, allow_blank=True, help_text="Default: the grader's name."
    )
    judge_endpoint = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="For a score_model whose model is not a team deployment: an allowed OpenAI-compatible "
        "endpoint (https://host/v1) that serves it.",
    )
    judge_api_key_secret = serializers.CharField(
        required=False, allow_blank=True, help_text="The team secret holding judge_endpoint's key."
    )


class VerifierImportOutput(VerifierOutput):
    notes = serializers.ListField(
        child=serializers.CharField(), help_text="What was carried over differently, by grader path."
    )

    class Meta(VerifierOutput.Meta):
        fields = [*VerifierOutput.Meta.fields, "notes"]


class VerifierImportApi(TeamScopedView):
    Input = VerifierImportInput

    @extend_schema(
        request=Input,
        responses={201: VerifierImportOutput},
        examples=[
            OpenApiExample(
                "string_check",
                value={
                    "grader": {
                        "type": "string_check",
                        "name": "exact answer",
                        "input": "{{sample.output_text}}",
                        "reference": "{{item.reference_answer}}",
                        "operation": "eq",
                    }
                },
                request_only=True,
            )
        ],
        description="Create a verifier from an OpenAI reinforcement fine-tuning grader (docs/openai-graders.md "
        "maps each field). What cannot be carried over is answered 400 naming its path (`grader.<path>`).",
    )
    def post(self, request):
        team = self.writable_team()
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        imported = verifier_import_openai(team=team, user=request.user, **data.validated_data)
        body = {**VerifierOutput(imported.verifier).data, "notes": imported.notes}
        return Response(body, status=status.HTTP_201_CREATED)
