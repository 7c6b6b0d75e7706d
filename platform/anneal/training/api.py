from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from anneal.api_base import TeamScopedView
from anneal.errors import InputError
from anneal.training.models import Checkpoint, Job, JobEvent
from anneal.training.selectors import job_events_after
from anneal.training.services import HYPER_FIELDS, job_cancel, job_launch, job_retry


class CheckpointOutput(serializers.ModelSerializer):
    class Meta:
        model = Checkpoint
        fields = ["id", "job", "step", "location", "lineage", "created_at"]


class JobOutput(serializers.ModelSerializer):
    checkpoints = CheckpointOutput(many=True, read_only=True)
    progress = serializers.FloatField(read_only=True)

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
            "created_at",
            "started_at",
            "finished_at",
            "checkpoints",
        ]


class EventOutput(serializers.ModelSerializer):
    class Meta:
        model = JobEvent
        fields = ["seq", "kind", "payload", "created_at"]


class JobListApi(TeamScopedView):
    class VerifierChoice(serializers.Serializer):
        verifier_version = serializers.IntegerField()
        weight = serializers.FloatField(default=1.0, min_value=0)

    class Input(serializers.Serializer):
        name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
        dataset_version = serializers.IntegerField()
        eval_dataset_version = serializers.IntegerField(
            required=False,
            allow_null=True,
            default=None,
            help_text="Held-out rows scored per domain before, during (params.eval_steps) and after training.",
        )
        verifiers = serializers.ListField(child=serializers.DictField(), allow_empty=False)
        params = serializers.DictField(
            required=False, default=dict, help_text=f"Training settings: {', '.join(HYPER_FIELDS)}"
        )

    @extend_schema(responses=JobOutput(many=True))
    def get(self, request):
        jobs = Job.objects.filter(team__in=self.teams()).prefetch_related("checkpoints")
        return Response(JobOutput(jobs, many=True).data)

    @extend_schema(request=Input, responses={201: JobOutput})
    def post(self, request):
        team = self.writable_team()
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        job = job_launch(
            team=team,
            user=request.user,
            name=data.validated_data["name"],
            dataset_version_id=data.validated_data["dataset_version"],
            verifiers=data.validated_data["verifiers"],
            params=data.validated_data["params"],
            eval_dataset_version_id=data.validated_data["eval_dataset_version"],
        )
        return Response(JobOutput(job).data, status=status.HTTP_201_CREATED)


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
    @extend_schema(request=None, responses={201: JobOutput})
    def post(self, request, pk: int):
        job = self.get_scoped(Job.objects.all(), pk)
        self.check_write(job.team)
        return Response(JobOutput(job_retry(job=job, user=request.user)).data, status=status.HTTP_201_CREATED)


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
                "results": EventOutput(events, many=True).data,
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
