from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from anneal.accounts.models import ApiToken, OutboundHost, TeamSecret
from anneal.accounts.scope import acting_team
from anneal.accounts.selectors import role_in
from anneal.accounts.services import (
    SECRET_MAX_BYTES,
    AlreadyExists,
    outbound_host_add,
    outbound_host_remove,
    team_secret_delete,
    team_secret_set,
)
from anneal.api_base import TeamScopedView


class MeOutput(serializers.Serializer):
    username = serializers.CharField()
    teams = serializers.ListField(child=serializers.DictField())


class MeApi(TeamScopedView):
    @extend_schema(responses=MeOutput)
    def get(self, request):
        teams = [{"id": t.id, "name": t.name, "role": role_in(request.user, t)} for t in self.teams()]
        via_token = isinstance(request.auth, ApiToken)
        return Response({"username": request.user.username, "teams": teams, "token": via_token})


# --- team secrets and allowed outbound hosts --------------------------------------------------------------


class SecretOutput(serializers.Serializer):
    """What the API tells about a secret: never its value."""

    name = serializers.CharField()
    created_by = serializers.CharField(source="created_by.username", default=None)
    created_at = serializers.DateTimeField()
    updated_by = serializers.CharField(source="updated_by.username", default=None)
    updated_at = serializers.DateTimeField()


class SecretInput(serializers.Serializer):
    name = serializers.CharField(max_length=100, help_text="Letters, digits, _ . - ; e.g. OPENAI_KEY.")
    value = serializers.CharField(
        max_length=SECRET_MAX_BYTES, trim_whitespace=False, write_only=True, help_text="Never returned."
    )


class SecretValueInput(serializers.Serializer):
    value = serializers.CharField(max_length=SECRET_MAX_BYTES, trim_whitespace=False, write_only=True)


def _conflict(exc: AlreadyExists) -> Response:
    return Response({"detail": str(exc), "errors": exc.errors}, status=status.HTTP_409_CONFLICT)


class TeamSecretListApi(TeamScopedView):
    @extend_schema(responses=SecretOutput(many=True), description="The acting team's secrets: names only.")
    def get(self, request):
        team = acting_team(request)
        secrets = TeamSecret.objects.filter(team=team, managed=False).select_related(
            "created_by", "updated_by"
        )
        return Response(SecretOutput(secrets, many=True).data)

    @extend_schema(
        request=SecretInput,
        responses={201: SecretOutput},
        description="Store a secret for the team's verifiers (owners and experts; 409 if the name is taken). "
        "The value is encrypted at rest and never returned; a model_judge names it in api_key_secret.",
    )
    def post(self, request):
        team = self.writable_team()
        data = SecretInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            secret = team_secret_set(team=team, user=request.user, **data.validated_data)
        except AlreadyExists as exc:
            return _conflict(exc)
        return Response(SecretOutput(secret).data, status=status.HTTP_201_CREATED)


class TeamSecretDetailApi(TeamScopedView):
    def _secret(self, name: str) -> TeamSecret:
        secret = TeamSecret.objects.filter(team=acting_team(self.request), name=name, managed=False).first()
        if secret is None:
            raise NotFound(f"The team has no secret named '{name}'.")
        return secret

    @extend_schema(request=SecretValueInput, responses=SecretOutput, description="Replace the value.")
    def put(self, request, name: str):
        secret = self._secret(name)
        self.check_write(secret.team)
        data = SecretValueInput(data=request.data)
        data.is_valid(raise_exception=True)
        secret = team_secret_set(
            team=secret.team, user=request.user, name=name, value=data.validated_data["value"], replace=True
        )
        return Response(SecretOutput(secret).data)

    @extend_schema(responses={204: None}, description="Delete the secret; judges naming it then score 0.")
    def delete(self, request, name: str):
        secret = self._secret(name)
        self.check_write(secret.team)
        team_secret_delete(secret=secret, user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class OutboundHostOutput(serializers.Serializer):
    id = serializers.IntegerField()
    host = serializers.CharField()
    note = serializers.CharField()
    created_by = serializers.CharField(source="created_by.username", default=None)
    created_at = serializers.DateTimeField()


class OutboundHostInput(serializers.Serializer):
    host = serializers.CharField(
        max_length=300,
        help_text="api.example.com, api.example.com:443, *.example.com, 10.0.0.5:8000 or [::1]",
    )
    note = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class OutboundHostListApi(TeamScopedView):
    @extend_schema(
        responses=OutboundHostOutput(many=True),
        description="The hosts the acting team's owners allowed its verifiers to call; those an operator "
        "allowed for the whole installation (ANNEAL_JUDGE_ALLOWED_HOSTS) apply too.",
    )
    def get(self, request):
        hosts = OutboundHost.objects.filter(team=acting_team(request)).select_related("created_by")
        return Response(OutboundHostOutput(hosts, many=True).data)

    @extend_schema(
        request=OutboundHostInput,
        responses={201: OutboundHostOutput},
        description="Allow the team's verifiers to call a host (owners only). Loopback, private, link-local "
        "and metadata addresses are reached only through an exact entry, never a wildcard.",
    )
    def post(self, request):
        team = self.writable_team()
        data = OutboundHostInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            allowed = outbound_host_add(team=team, user=request.user, **data.validated_data)
        except AlreadyExists as exc:
            return _conflict(exc)
        return Response(OutboundHostOutput(allowed).data, status=status.HTTP_201_CREATED)


class OutboundHostDetailApi(TeamScopedView):
    @extend_schema(responses={204: None}, description="Stop allowing the host (owners only).")
    def delete(self, request, pk: int):
        allowed = self.get_scoped(OutboundHost.objects.select_related("team"), pk)
        outbound_host_remove(allowed=allowed, user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
