from django.contrib import admin, messages

from anneal.errors import InputError
from anneal.training.models import Checkpoint, Job, JobEvent, JobVerifier, TeamLimits
from anneal.training.services import job_cancel, job_retry
from anneal.training.state import job_pause, job_resume


class JobVerifierInline(admin.TabularInline):
    model = JobVerifier
    extra = 0
    readonly_fields = ["verifier_version", "name", "weight"]
    can_delete = False


class CheckpointInline(admin.TabularInline):
    model = Checkpoint
    extra = 0
    readonly_fields = ["step", "location", "created_at"]
    fields = readonly_fields
    can_delete = False


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "name",
        "team",
        "state",
        "priority",
        "step",
        "max_steps",
        "created_by",
        "created_at",
        "finished_at",
    ]
    list_filter = ["state", "team", "created_at"]
    search_fields = ["name", "id", "created_by__username"]
    readonly_fields = [
        "state",
        "spec",
        "dataset_version",
        "error",
        "step",
        "last_seq",
        "worker",
        "child_pid",
        "heartbeat_at",
        "started_at",
        "finished_at",
        "retry_of",
        "attempt",
        "restarts",
        "reason",
        "queued_at",
        "dispatched_at",
        "attempt_started_at",
        "run_seconds",
        "sandbox_seconds",
        "devices",
        "device_type",
    ]
    # Priority is not read-only: operators may reorder the queue.
    inlines = [JobVerifierInline, CheckpointInline]
    actions = ["cancel_jobs", "pause_jobs", "resume_jobs", "retry_jobs"]

    @admin.action(description="Pause the selected jobs (running ones checkpoint first)")
    def pause_jobs(self, request, queryset):
        self._each(request, queryset, job_pause, "pause requested")

    @admin.action(description="Resume the selected paused jobs from their checkpoint")
    def resume_jobs(self, request, queryset):
        self._each(request, queryset, job_resume, "queued again")

    def _each(self, request, queryset, service, done: str) -> None:
        for job in queryset:
            try:
                job = service(job=job, user=request.user)
                self.message_user(request, f"Job #{job.pk}: {done} ({job.state}).")
            except InputError as exc:
                self.message_user(request, str(exc), level=messages.WARNING)

    @admin.action(description="Cancel the selected jobs")
    def cancel_jobs(self, request, queryset):
        for job in queryset:
            job_cancel(job=job, user=request.user)
        self.message_user(request, f"Cancel requested for {queryset.count()} job(s).")

    @admin.action(description="Retry the selected jobs (a new job with the same spec)")
    def retry_jobs(self, request, queryset):
        for job in queryset:
            try:
                new = job_retry(job=job, user=request.user)
                self.message_user(request, f"Job #{job.pk} retried as #{new.pk}.")
            except InputError as exc:
                self.message_user(request, str(exc), level=messages.WARNING)


@admin.register(JobEvent)
class JobEventAdmin(admin.ModelAdmin):
    list_display = ["job", "seq", "kind", "created_at"]
    list_filter = ["kind"]
    search_fields = ["job__id", "job__name"]


@admin.register(Checkpoint)
class CheckpointAdmin(admin.ModelAdmin):
    list_display = ["job", "step", "location", "created_at"]
    list_filter = ["job__team"]
    search_fields = ["job__name", "location"]


@admin.register(TeamLimits)
class TeamLimitsAdmin(admin.ModelAdmin):
    list_display = ["team", "max_running_jobs", "max_devices"]
    search_fields = ["team__name"]


def _unregister_dash_internals() -> None:
    """django_plotly_dash registers its own bookkeeping (DashApp, StatelessApp): rows operators never edit, and
    editing them breaks the dashboards. Its admin module runs before this one (INSTALLED_APPS order)."""
    from django.apps import apps

    if not apps.is_installed("django_plotly_dash"):
        return
    for model in apps.get_app_config("django_plotly_dash").get_models():
        if admin.site.is_registered(model):
            admin.site.unregister(model)


_unregister_dash_internals()
