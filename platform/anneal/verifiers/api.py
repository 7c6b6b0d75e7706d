from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from anneal.api_base import TeamScopedView
from anneal.verifiers.models import Verifier, VerifierVersion
from anneal.verifiers.services import verifier_create, verifier_version_create

SPEC_EXAMPLES = [
    OpenApiExample(
        "exact match",
        value={
            "name": "exact answer",
            "spec": {"type": "exact_match", "reference_field": "answer", "case_sensitive": False},
        },
    ),
    OpenApiExample(
        "python tests",
        value={
            "name": "unit tests",
            "spec": {"type": "python_tests", "tests_field": "tests", "scoring": "fraction"},
        },
    ),
]


class VersionOutput(serializers.ModelSerializer):
    class Meta:
        model = VerifierVersion
        fields = ["id", "number", "spec", "created_at"]


class VerifierOutput(serializers.ModelSerializer):
    versions = VersionOutput(many=True, read_only=True)

    class Meta:
        model = Verifier
        fields = ["id", "name", "created_at", "versions"]


class SpecInput(serializers.Serializer):
    spec = serializers.JSONField()


class VerifierListApi(TeamScopedView):
    class Input(SpecInput):
        name = serializers.CharField(max_length=200)

    @extend_schema(responses=VerifierOutput(many=True))
    def get(self, request):
        verifiers = Verifier.objects.filter(team__in=self.teams()).prefetch_related("versions")
        return Response(VerifierOutput(verifiers, many=True).data)

    @extend_schema(request=Input, responses={201: VerifierOutput}, examples=SPEC_EXAMPLES)
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


class VerifierVersionCreateApi(TeamScopedView):
    @extend_schema(request=SpecInput, responses={201: VersionOutput})
    def post(self, request, pk: int):
        verifier = self.get_scoped(Verifier.objects.all(), pk)
        self.check_write(verifier.team)
        data = SpecInput(data=request.data)
        data.is_valid(raise_exception=True)
        version = verifier_version_create(
            verifier=verifier, user=request.user, spec=data.validated_data["spec"]
        )
        return Response(VersionOutput(version).data, status=status.HTTP_201_CREATED)
