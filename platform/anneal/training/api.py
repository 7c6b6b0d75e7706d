"""REST API of training: jobs, runs, checkpoints and rollouts, one view per operation.

Past 400 lines: one view per operation on jobs, runs, checkpoints and rollouts; it splits by those
resources next.
"""

from django.conf import settings
from django.db import transaction
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.response import Response

from anneal.api_base import TeamScopedView
from anneal.errors import InputError
from anneal.training.answer_lengths import spec_warnings
from anneal.training.costs import job_estimate, job_spend
from anneal.training.job_page import event_as_read
from anneal.training.limits import LIMIT_FIELDS, limit_defaults, limit_helps
from anneal.training.models import Checkpoint, Job, JobEvent
from anneal.training.selectors import job_events_after, job_rollouts, queue_state
from anneal.training.services import JobInputsGone, job_cancel, job_launch, job_retry
from anneal.training.spec import available_models
from anneal.training.state import job_pause, job_resume
from gpu_jobs.spec import SETTING_NAMES, setting_fields, settings_json_schema


def _params_schema() -> dict:
    """The launch's params in the OpenAPI schema: the user's settings (gpu_jobs.spec), then the run limits."""
    schema = settings_json_schema()
    helps = limit_helps()
    for name, default in limit_defaults().items():
        json_type = {bool: "boolean", int: "integer", float: "number"}.get(type(default), "string")
        schema["properties"][name] = {"type": json_type, "default": default, "description": helps[name]}
    return schema


@extend_schema_field(_params_schema())
class ParamsField(serializers.DictField):
    """Taken as a plain object: job_launch checks each value, so that a wrong one gets its field named."""


class CheckpointOutput(serializers.ModelSerializer):
    # Where the files lie on the server is the platform's business, not the user's: never shown.
    class Meta:
        model = Checkpoint
        fields = ["id", "job", "step", "lineage", "created_at"]


class JobOutput(serializers.ModelSerializer):
    checkpoints = CheckpointOutput(many=True, read_only=True)
    progress = serializers.FloatField(read_only=True)
    spend = serializers.SerializerMethodField(help_text="Spend so far in USD: devices and sandboxes, live.")

    def get_spend(self, job: Job) -> dict:
        return job_spend(job)

    class Meta:
        model = Job
        fields = [
            "id",
            "name",
            "state",
            "spec",
            "dataset_version",
            "error",
            "step",
            "max_steps",
            "progress",
            "last_seq",
            "retry_of",
            "priority",
            "devices",
            "device_type",
            "attempt",
            "restarts",
            "reason",
            "spend",
            "queued_at",
            "created_at",
            "started_at",
            "finished_at",
            "checkpoints",
        ]


class LaunchWarning(serializers.Serializer):
    field = serializers.CharField(help_text="The input it is about, as an error would name it.")
    message = serializers.CharField()


class JobLaunchOutput(JobOutput):
    warnings = serializers.SerializerMethodField(
        help_text="What the launch did not stop for but you should know: max_completion_length shorter than "
        "the data's longest reference answer in the model's tokens."
    )

    @extend_schema_field(LaunchWarning(many=True))
    def get_warnings(self, job: Job) -> list[dict]:
        return spec_warnings(job.spec)

    class Meta(JobOutput.Meta):
        fields = [*JobOutput.Meta.fields, "warnings"]


class EventOutput(serializers.ModelSerializer):
    class Meta:
        model = JobEvent
        fields = ["seq", "kind", "payload", "created_at"]


class JobListApi(TeamScopedView):
    class VerifierChoice(serializers.Serializer):
        verifier_version = serializers.IntegerField()
        weight = serializers.FloatField(default=1.0, min_value=0)

    class Input(serializers.Serializer):
        class Meta:
            ref_name = "JobLaunchInput"

        name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
        dataset_version = serializers.IntegerField(
            required=False,
            allow_null=True,
            default=None,
            help_text="The dataset version to train on; or give several in dataset_versions.",
        )
        dataset_versions = serializers.ListField(
            child=serializers.IntegerField(),
            required=False,
            default=list,
            help_text="Several dataset versions whose rows are pooled (each row keeps its domain); the first "
            "is the job's main version. Overrides dataset_version.",
        )
        domain_weights = serializers.DictField(
            required=False,
            default=dict,
            help_text='Share of the prompts per domain ("all" for rows without a domain), summing to 1, '
            "naming every domain of the data; empty: equal shares.",
        )
        eval_dataset_version = serializers.IntegerField(
            required=False,
            allow_null=True,
            default=None,
            help_text="Held-out rows scored per domain before, during (params.eval_steps) and after training.",
        )
        verifiers = serializers.ListField(
            child=serializers.DictField(),
            required=False,
            default=list,
            help_text='[{"verifier_version": id, "weight": number >= 0, "domains": [names] (optional: '
            "the domains it scores; absent: every domain)}]. Every domain needs a verifier with a weight "
            "above 0. "
            "Optional for an agent job (params.environment), which its environment rewards.",
        )
        params = ParamsField(
            required=False,
            default=dict,
            help_text=f"Training settings: {', '.join(SETTING_NAMES)}; scheduling and cost: "
            f"{', '.join(LIMIT_FIELDS)}",
        )

    @extend_schema(responses=JobOutput(many=True))
    def get(self, request):
        jobs = Job.objects.filter(team__in=self.teams()).prefetch_related("checkpoints")
        return Response(JobOutput(jobs, many=True).data)

    @extend_schema(request=Input, responses={201: JobLaunchOutput})
    def post(self, request):
        job = self.launch(request, team=self.writable_team())
        return Response(JobLaunchOutput(job).data, status=status.HTTP_201_CREATED)

    @classmethod
    def launch(cls, request, *, team) -> Job:
        """Parse the launch body and call job_launch: shared by launch and estimate, so both check alike."""
        data = cls.Input(data=request.data)
        data.is_valid(raise_exception=True)
        return job_launch(
            team=team,
            user=request.user,
            name=data.validated_data["name"],
            dataset_version_id=data.validated_data["dataset_version"],
            verifiers=data.validated_data["verifiers"],
            params=data.validated_data["params"],
            eval_dataset_version_id=data.validated_data["eval_dataset_version"],
            dataset_version_ids=data.validated_data["dataset_versions"],
            domain_weights=data.validated_data["domain_weights"],
        )


class EstimateOutput(serializers.Serializer):
    currency = serializers.CharField()
    seconds = serializers.FloatField(help_text="Estimated run time.")
    device_type = serializers.CharField()
    devices = serializers.IntegerField()
    price_per_device_hour = serializers.FloatField()
    device_hours = serializers.FloatField()
    device_cost = serializers.FloatField()
    sandbox_hours = serializers.FloatField()
    sandbox_price_per_hour = serializers.FloatField()
    sandbox_cost = serializers.FloatField()
    total = serializers.FloatField()
    budget = serializers.FloatField(allow_null=True)
    over_budget = serializers.BooleanField()
    basis = serializers.CharField(
        help_text="What the step time was taken from: a finished job, or default rates."
    )
    warnings = LaunchWarning(many=True, help_text="As a launch's: what it would not stop for.")


class QueueWaitingOutput(serializers.Serializer):
    job = serializers.IntegerField()
    name = serializers.CharField()
    priority = serializers.IntegerField()
    devices = serializers.IntegerField()
    position = serializers.IntegerField(help_text="1 starts next, counting every team's waiting jobs.")
    estimated_start = serializers.DateTimeField()
    estimated_seconds = serializers.FloatField()
    held_by = serializers.CharField(allow_null=True, help_text="The team limit that holds it, if any.")


class QueueRunningOutput(serializers.Serializer):
    job = serializers.IntegerField()
    name = serializers.CharField()
    state = serializers.CharField()
    estimated_end = serializers.DateTimeField()


class QueueOutput(serializers.Serializer):
    slots = serializers.IntegerField(help_text="Jobs the gpu workers run at once.")
    waiting_total = serializers.IntegerField()
    waiting = QueueWaitingOutput(many=True)
    running = QueueRunningOutput(many=True)


class JobEstimateApi(TeamScopedView):
    @extend_schema(
        request=JobListApi.Input,
        responses=EstimateOutput,
        description="What launching this job would cost, before launch: run time, device-hours times the "
        "price of its device type, sandbox time. The job is checked exactly as a launch checks it (the same "
        "400 naming the field), then nothing is kept.",
    )
    def post(self, request):
        team = self.writable_team()
        with transaction.atomic():
            job = JobListApi.launch(request, team=team)
            estimate = job_estimate(spec=job.spec, team=team) | {"warnings": spec_warnings(job.spec)}
            transaction.set_rollback(True)  # checked, not launched: no job, event, audit entry or task
        return Response(EstimateOutput(estimate).data)


class JobPauseApi(TeamScopedView):
    @extend_schema(
        request=None,
        responses=JobOutput,
        description="A running job checkpoints and pauses (state pausing, then paused); a queued one pauses "
        "at once. Its devices are freed; resume continues from the checkpoint.",
    )
    def post(self, request, pk: int):
        job = self.get_scoped(Job.objects.all(), pk)
        self.check_write(job.team)
        return Response(JobOutput(job_pause(job=job, user=request.user)).data)


class JobResumeApi(TeamScopedView):
    class Input(serializers.Serializer):
        budget = serializers.FloatField(
            required=False, help_text="A new budget in USD (to resume past a cap)."
        )
        time_limit_minutes = serializers.FloatField(required=False, help_text="A new time limit.")

        class Meta:
            ref_name = "JobResumeInput"

    @extend_schema(request=Input, responses=JobOutput, description="Queue a paused job again.")
    def post(self, request, pk: int):
        job = self.get_scoped(Job.objects.all(), pk)
        self.check_write(job.team)
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(JobOutput(job_resume(job=job, user=request.user, **data.validated_data)).data)


class JobQueueApi(TeamScopedView):
    @extend_schema(
        responses=QueueOutput,
        description="Waiting jobs of your teams in the order they will start (position counts every "
        "team's jobs), with estimated start, and your running jobs with their estimated end.",
    )
    def get(self, request):
        state = queue_state(teams=self.teams())
        return Response(
            {
                "slots": state["slots"],
                "waiting_total": state["waiting_total"],
                "waiting": [
                    {
                        "job": w["job"].pk,
                        "name": w["job"].name,
                        "priority": w["job"].priority,
                        "devices": w["job"].devices,
                        "position": w["position"],
                        "estimated_start": w["estimated_start"],
                        "estimated_seconds": w["estimated_seconds"],
                        "held_by": w["held_by"],
                    }
                    for w in state["waiting"]
                ],
                "running": [
                    {
                        "job": r["job"].pk,
                        "name": r["job"].name,
                        "state": r["job"].state,
                        "estimated_end": r["estimated_end"],
                    }
                    for r in state["running"]
                ],
            }
        )


class JobSpecApi(TeamScopedView):
    @extend_schema(
        description="Every setting of a job's params: name, type, default, allowed values and help (the "
        "launch form shows the same), and the models this host can start from.",
    )
    def get(self, request):
        return Response({"params": setting_fields(), "models": available_models()})


class ModelListApi(TeamScopedView):
    @extend_schema(
        description="Base models a job may name in params.model: the built-in tiny and SmolLM2-135M-Instruct "
        "(built or imported on first use), the model store's folders, and hub ids where ANNEAL_ALLOW_HUB is on.",
    )
    def get(self, request):
        return Response({"results": available_models(), "hub_ids_allowed": settings.MODEL_ALLOW_HUB})


class JobDetailApi(TeamScopedView):
    @extend_schema(responses=JobOutput)
    def get(self, request, pk: int):
        return Response(JobOutput(self.get_scoped(Job.objects.all(), pk)).data)


class JobCancelApi(TeamScopedView):
    @extend_schema(request=None, responses=JobOutput)
    def post(self, request, pk: int):
        job = self.get_scoped(Job.objects.all(), pk)
        self.check_write(job.team)
        return Response(JobOutput(job_cancel(job=job, user=request.user)).data)


class JobRetryApi(TeamScopedView):
    @extend_schema(
        request=None,
        responses={201: JobOutput},
        description="Run a finished job's frozen spec again as a new job; 409 when a dataset version it "
        "names was deleted.",
    )
    def post(self, request, pk: int):
        job = self.get_scoped(Job.objects.all(), pk)
        self.check_write(job.team)
        try:
            new = job_retry(job=job, user=request.user)
        except JobInputsGone as exc:
            return Response({"detail": str(exc), "errors": exc.errors}, status=status.HTTP_409_CONFLICT)
        return Response(JobOutput(new).data, status=status.HTTP_201_CREATED)


class JobEventsApi(TeamScopedView):
    class Params(serializers.Serializer):
        after = serializers.IntegerField(min_value=0, default=0)
        limit = serializers.IntegerField(min_value=1, max_value=1000, default=500)

    @extend_schema(
        parameters=[Params],
        description="Events with seq > after, in order. Page by passing the last seq you received as `after`.",
    )
    def get(self, request, pk: int):
        job = self.get_scoped(Job.objects.all(), pk)
        params = self.Params(data=request.query_params)
        params.is_valid(raise_exception=True)
        events = list(job_events_after(job=job, **params.validated_data))
        return Response(
            {
                "job": job.pk,
                "state": job.state,
                "last_seq": job.last_seq,
                "results": [event_as_read(dict(event)) for event in EventOutput(events, many=True).data],
            }
        )


class JobRolloutsApi(TeamScopedView):
    class Params(serializers.Serializer):
        tampering = serializers.BooleanField(
            required=False,
            allow_null=True,
            default=None,
            help_text="1: only rollouts that tried to tamper with a verifier (the reward_tampering alarm's); "
            "0: only the others; absent: all.",
        )
        step = serializers.IntegerField(min_value=0, required=False, allow_null=True, default=None)
        held_out = serializers.BooleanField(
            required=False,
            allow_null=True,
            default=None,
            help_text="1: only an agent job's held-out evaluation episodes (payload held_out: true; tasks the "
            "job never trains on); 0: only training rollouts; absent: all.",
        )
        after = serializers.IntegerField(min_value=0, default=0, help_text="Only rollouts with seq > after.")
        limit = serializers.IntegerField(min_value=1, max_value=1000, default=200)

    @extend_schema(
        parameters=[Params],
        description="The job's rollouts (every one the job reported, none sampled out), in seq order, "
        "filtered. Page by passing next_after as after. Each tampering rollout's payload says what it tried "
        "under the key tampering.",
    )
    def get(self, request, pk: int):
        job = self.get_scoped(Job.objects.all(), pk)
        params = self.Params(data=request.query_params)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        found = job_rollouts(
            job=job, tampering=data["tampering"], step=data["step"], held_out=data["held_out"]
        )
        page = list(found.filter(seq__gt=data["after"])[: data["limit"]])
        return Response(
            {
                "job": job.pk,
                "count": found.count(),
                "results": EventOutput(page, many=True).data,
                "next_after": page[-1].seq if len(page) == data["limit"] else None,
            }
        )


class CheckpointListApi(TeamScopedView):
    @extend_schema(responses=CheckpointOutput(many=True))
    def get(self, request):
        checkpoints = Checkpoint.objects.filter(job__team__in=self.teams())
        return Response(CheckpointOutput(checkpoints, many=True).data)


class RolloutFlagApi(TeamScopedView):
    class Input(serializers.Serializer):
        verifier = serializers.IntegerField(help_text="One of the job's verifiers (its id).")
        expected_pass = serializers.BooleanField(
            help_text="Whether the verifier should give this completion full marks (false: it should fail)."
        )
        note = serializers.CharField(required=False, allow_blank=True, default="")

    class Output(serializers.Serializer):
        id = serializers.IntegerField()
        verifier = serializers.IntegerField(source="verifier_id")
        expected_pass = serializers.BooleanField()
        note = serializers.CharField()
        source_job = serializers.IntegerField(source="source_job_id")
        source_seq = serializers.IntegerField()

    @extend_schema(
        request=Input,
        responses={201: Output},
        description="Turn a rollout of the job into a test case of one of its verifiers: every later version "
        "of the verifier is checked against it.",
    )
    def post(self, request, pk: int, seq: int):
        from anneal.verifiers.models import Verifier
        from anneal.verifiers.services import verifier_test_case_from_rollout

        job = self.get_scoped(Job.objects.all(), pk)
        self.check_write(job.team)
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        verifier = Verifier.objects.filter(pk=data.validated_data["verifier"], team=job.team).first()
        if verifier is None:
            raise InputError(
                f"no verifier with id {data.validated_data['verifier']} in this team", field="verifier"
            )
        case = verifier_test_case_from_rollout(
            job=job,
            seq=seq,
            verifier=verifier,
            expected_pass=data.validated_data["expected_pass"],
            note=data.validated_data["note"],
            user=request.user,
        )
        return Response(self.Output(case).data, status=status.HTTP_201_CREATED)
