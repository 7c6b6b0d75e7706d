"""REST API for deployments: create, list, detail, stop, switch tier, gate override, keys, usage, budget."""

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from anneal.accounts.scope import acting_team
from anneal.api_base import TeamScopedView
from anneal.deployments.models import Deployment, DeploymentKey, GateResult, Replica, Tier
from anneal.deployments.selectors import (
    deployment_usage,
    team_budget_cap,
    team_usage,
    tier_cards,
    usage_series,
)
from anneal.deployments.services import (
    MAX_CONCURRENCY,
    MAX_REPLICAS,
    deployment_create,
    deployment_gate_override,
    deployment_key_create,
    deployment_key_revoke,
    deployment_stop,
    deployment_switch_tier,
    team_budget_set,
)
from anneal.errors import InputError


class ReplicaOutput(serializers.ModelSerializer):
    class Meta:
        model = Replica
        fields = [
            "id",
            "tier",
            "state",
            "host",
            "port",
            "pid",
            "error",
            "ready_at",
            "heartbeat_at",
            "stopped_at",
        ]


class GateOutput(serializers.ModelSerializer):
    overridden_by = serializers.CharField(source="overridden_by.username", default=None, read_only=True)

    class Meta:
        model = GateResult
        fields = ["passed", "max_drop", "scores", "note", "overridden_by", "overridden_at", "created_at"]


class DeploymentOutput(serializers.ModelSerializer):
    job = serializers.IntegerField(source="checkpoint.job_id", read_only=True)
    replica_set = ReplicaOutput(many=True, read_only=True)
    gate = serializers.SerializerMethodField()
    base_url = serializers.SerializerMethodField()
    price_per_mtok = serializers.SerializerMethodField()

    class Meta:
        model = Deployment
        fields = [
            "id",
            "name",
            "tier",
            "state",
            "error",
            "replicas",
            "max_concurrency",
            "checkpoint",
            "job",
            "gate_overridden",
            "gate",
            "base_url",
            "price_per_mtok",
            "created_at",
            "ready_at",
            "stopped_at",
            "replica_set",
        ]

    def get_gate(self, deployment) -> dict | None:
        gate = deployment.gate_results.first()
        return GateOutput(gate).data if gate else None

    def get_base_url(self, deployment) -> str:
        return f"{settings.BASE_URL.rstrip('/')}/v1"

    def get_price_per_mtok(self, deployment) -> str:
        return str(settings.DEPLOY_PRICE_PER_MTOK[deployment.tier])


class KeyOutput(serializers.ModelSerializer):
    class Meta:
        model = DeploymentKey
        fields = ["id", "name", "deployment", "key_hint", "created_at", "last_used_at", "revoked_at"]


def _deployments(view):
    return (
        Deployment.objects.filter(team__in=view.teams())
        .select_related("checkpoint")
        .prefetch_related("replica_set", "gate_results")
    )


class DeploymentListApi(TeamScopedView):
    class Input(serializers.Serializer):
        checkpoint = serializers.IntegerField(help_text="The checkpoint to serve (GET /api/v1/checkpoints).")
        name = serializers.CharField(
            max_length=200,
            required=False,
            allow_blank=True,
            default="",
            help_text="The `model` clients send.",
        )
        tier = serializers.ChoiceField(choices=Tier.values, default=Tier.STANDARD)
        replicas = serializers.IntegerField(min_value=1, max_value=MAX_REPLICAS, default=1)
        max_concurrency = serializers.IntegerField(min_value=1, max_value=MAX_CONCURRENCY, default=4)

    @extend_schema(responses=DeploymentOutput(many=True))
    def get(self, request):
        return Response(DeploymentOutput(_deployments(self), many=True).data)

    @extend_schema(
        request=Input,
        responses={201: DeploymentOutput},
        description="Deploy a checkpoint: pending, then the regression gate, then starting -> ready.",
    )
    def post(self, request):
        team = self.writable_team()
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        deployment = deployment_create(
            team=team,
            user=request.user,
            checkpoint_id=values["checkpoint"],
            name=values["name"],
            tier=values["tier"],
            replicas=values["replicas"],
            max_concurrency=values["max_concurrency"],
        )
        return Response(DeploymentOutput(deployment).data, status=status.HTTP_201_CREATED)


class DeploymentDetailApi(TeamScopedView):
    @extend_schema(responses=DeploymentOutput)
    def get(self, request, pk: int):
        return Response(DeploymentOutput(self.get_scoped(_deployments(self), pk)).data)


class DeploymentStopApi(TeamScopedView):
    @extend_schema(request=None, responses=DeploymentOutput)
    def post(self, request, pk: int):
        deployment = self.get_scoped(Deployment.objects.all(), pk)
        self.check_write(deployment.team)
        return Response(DeploymentOutput(deployment_stop(deployment=deployment, user=request.user)).data)


class DeploymentTierApi(TeamScopedView):
    class Input(serializers.Serializer):
        tier = serializers.ChoiceField(choices=Tier.values)

    @extend_schema(
        request=Input,
        responses=DeploymentOutput,
        description="Switch tier: new replicas start; the old ones serve until one is ready, then drain.",
    )
    def post(self, request, pk: int):
        deployment = self.get_scoped(Deployment.objects.all(), pk)
        self.check_write(deployment.team)
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        deployment = deployment_switch_tier(
            deployment=deployment, tier=data.validated_data["tier"], user=request.user
        )
        return Response(DeploymentOutput(deployment).data)


class DeploymentGateOverrideApi(TeamScopedView):
    class Input(serializers.Serializer):
        reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)

    @extend_schema(request=Input, responses=DeploymentOutput, description="Owners only; audited.")
    def post(self, request, pk: int):
        deployment = self.get_scoped(Deployment.objects.all(), pk)
        self.check_write(deployment.team)
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        deployment = deployment_gate_override(
            deployment=deployment, user=request.user, reason=data.validated_data["reason"]
        )
        return Response(DeploymentOutput(deployment).data)


class KeyListApi(TeamScopedView):
    class Input(serializers.Serializer):
        name = serializers.CharField(max_length=100)
        deployment = serializers.IntegerField(
            required=False, allow_null=True, default=None, help_text="Empty: every deployment of the team."
        )

    class Created(KeyOutput):
        key = serializers.CharField(read_only=True, help_text="The secret, shown this once only.")

        class Meta(KeyOutput.Meta):
            fields = [*KeyOutput.Meta.fields, "key"]

    @extend_schema(responses=KeyOutput(many=True))
    def get(self, request):
        keys = DeploymentKey.objects.filter(team__in=self.teams())
        return Response(KeyOutput(keys, many=True).data)

    @extend_schema(request=Input, responses={201: Created})
    def post(self, request):
        team = self.writable_team()
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        deployment = None
        if data.validated_data["deployment"] is not None:
            deployment = self.get_scoped(Deployment.objects.all(), data.validated_data["deployment"])
        key, raw = deployment_key_create(
            team=team, user=request.user, name=data.validated_data["name"], deployment=deployment
        )
        key.key = raw
        response = Response(self.Created(key).data, status=status.HTTP_201_CREATED)
        response["Cache-Control"] = "no-store"
        return response


class KeyRevokeApi(TeamScopedView):
    @extend_schema(request=None, responses=KeyOutput)
    def post(self, request, pk: int):
        key = self.get_scoped(DeploymentKey.objects.all(), pk)
        self.check_write(key.team)
        return Response(KeyOutput(deployment_key_revoke(key=key, user=request.user)).data)


class DeploymentUsageApi(TeamScopedView):
    @extend_schema(responses=dict, description="Tokens and cost per key and tier, per hour, and tier speeds.")
    def get(self, request, pk: int):
        deployment = self.get_scoped(Deployment.objects.all(), pk)
        cards = [{**card, "price_per_mtok": str(card["price_per_mtok"])} for card in tier_cards(deployment)]
        return Response(
            {
                **deployment_usage(deployment),
                "series": usage_series(deployment=deployment),
                "tiers": cards,
                "team": team_usage(deployment.team),
            }
        )


class TeamUsageApi(TeamScopedView):
    class Input(serializers.Serializer):
        monthly_cap_usd = serializers.DecimalField(
            max_digits=14, decimal_places=6, min_value=0, allow_null=True, help_text="null: no cap."
        )

    @extend_schema(responses=dict, description="The team's spend this month, all time, and its budget cap.")
    def get(self, request):
        team = self._team()
        return Response({**team_usage(team), "series": usage_series(team=team)})

    @extend_schema(
        request=Input,
        responses=dict,
        description="Set the team's monthly budget cap (USD). Owners only: anyone else gets 403.",
    )
    def post(self, request):
        team = self.writable_team()
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        team_budget_set(team=team, user=request.user, monthly_cap_usd=data.validated_data["monthly_cap_usd"])
        cap = team_budget_cap(team.pk)
        return Response({**team_usage(team), "monthly_cap_usd": None if cap is None else str(cap)})

    def _team(self):
        team = acting_team(self.request)
        if team is None:
            raise InputError("you are not a member of any team", field="team")
        return team
