from django.contrib import admin, messages

from anneal.deployments.models import (
    BatchFile,
    BatchJob,
    Deployment,
    DeploymentKey,
    GateResult,
    Replica,
    TeamBudget,
    UsageRecord,
)
from anneal.deployments.services import deployment_stop


class ReplicaInline(admin.TabularInline):
    model = Replica
    extra = 0
    can_delete = False
    readonly_fields = ["tier", "state", "worker", "host", "port", "pid", "error", "ready_at", "heartbeat_at"]
    fields = readonly_fields


class GateInline(admin.TabularInline):
    model = GateResult
    extra = 0
    can_delete = False
    readonly_fields = ["passed", "max_drop", "scores", "note", "overridden_by", "overridden_at", "created_at"]
    fields = readonly_fields


@admin.register(Deployment)
class DeploymentAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "tier", "state", "replicas", "created_at"]
    list_filter = ["tier", "state", "team"]
    search_fields = ["name"]
    readonly_fields = ["state", "error", "gate_overridden", "ready_at", "stopped_at"]
    inlines = [ReplicaInline, GateInline]
    actions = ["stop"]

    @admin.action(description="Stop the selected deployments (drain their replicas)")
    def stop(self, request, queryset):
        for deployment in queryset:
            deployment_stop(deployment=deployment, user=request.user)
        messages.success(request, f"{queryset.count()} deployment(s) draining.")


@admin.register(DeploymentKey)
class DeploymentKeyAdmin(admin.ModelAdmin):
    list_display = ["name", "key_hint", "team", "deployment", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["team"]
    readonly_fields = ["key_hash", "key_hint"]


@admin.register(UsageRecord)
class UsageRecordAdmin(admin.ModelAdmin):
    list_display = [
        "created_at", "team", "deployment", "key", "tier", "endpoint", "prompt_tokens", "completion_tokens",
        "cost_usd", "latency_ms", "status_code",
    ]  # fmt: skip
    list_filter = ["tier", "endpoint", "team"]
    date_hierarchy = "created_at"


@admin.register(TeamBudget)
class TeamBudgetAdmin(admin.ModelAdmin):
    list_display = ["team", "monthly_cap_usd", "updated_at"]


@admin.register(BatchJob)
class BatchJobAdmin(admin.ModelAdmin):
    list_display = ["id", "team", "endpoint", "state", "total", "completed", "failed", "created_at"]
    list_filter = ["state", "team"]


@admin.register(BatchFile)
class BatchFileAdmin(admin.ModelAdmin):
    list_display = ["id", "team", "filename", "purpose", "bytes", "lines", "created_at"]
    list_filter = ["purpose", "team"]
