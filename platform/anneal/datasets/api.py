"""REST for datasets: one view per operation. Errors: 400 with the field (and row) named; 409 when in use.

Past 400 lines: one view per operation on datasets, versions, uploads, rows and splits; it splits by those
resources next.
"""

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response

from anneal.accounts.services import audit
from anneal.api_base import TeamScopedView
from anneal.api_parsers import JSONParser
from anneal.datasets.models import Dataset, DatasetUpload, DatasetVersion
from anneal.datasets.pack_catalogue import MAX_DIFFICULTY, MAX_PACK_ROWS, offered_tasks
from anneal.datasets.pack_services import domain_pack_create
from anneal.datasets.preview import UploadPreview
from anneal.datasets.selectors import upload_errors, upload_errors_csv, upload_preview
from anneal.datasets.services import (
    FileTooLarge,
    InUse,
    dataset_delete,
    dataset_upload_accept,
    dataset_upload_create,
    dataset_upload_map,
    dataset_upload_reject,
    dataset_version_delete,
)
from anneal.datasets.splits import METHODS, dataset_version_split
from anneal.datasets.storage import read_rows


class DatasetVersionOutput(serializers.ModelSerializer):
    class Meta:
        model = DatasetVersion
        fields = [
            "id",
            "dataset",
            "number",
            "row_count",
            "columns",
            "sha256",
            "stats",
            "parent",
            "split_role",
            "split",
            "pack",
            "source_upload",
            "created_at",
        ]


class DatasetOutput(serializers.ModelSerializer):
    versions = DatasetVersionOutput(many=True, read_only=True)

    class Meta:
        model = Dataset
        fields = ["id", "name", "description", "created_at", "versions"]


class DatasetUploadOutput(serializers.ModelSerializer):
    dataset_version = serializers.SerializerMethodField()
    preview_ready = serializers.SerializerMethodField(
        help_text="Whether the worker has read the first rows (GET …/preview); always true past `mapping`."
    )

    class Meta:
        model = DatasetUpload
        fields = [
            "id",
            "dataset_name",
            "file_name",
            "file_format",
            "size_bytes",
            "mapping",
            "tokenizer",
            "state",
            "rows_seen",
            "progress",
            "rows_valid",
            "duplicate_count",
            "duplicates",
            "error_count",
            "errors",
            "staged",
            "dataset_version",
            "preview_ready",
            "created_at",
            "finished_at",
        ]

    def get_preview_ready(self, upload) -> bool:
        return upload.state != "mapping" or bool(upload.preview)

    def get_dataset_version(self, upload) -> int | None:
        version = DatasetVersion.objects.filter(source_upload=upload).first()
        return version.id if version else None


def _conflict(exc: InUse) -> Response:
    return Response({"detail": str(exc), "errors": exc.errors}, status=status.HTTP_409_CONFLICT)


class DatasetListApi(TeamScopedView):
    @extend_schema(responses=DatasetOutput(many=True))
    def get(self, request):
        datasets = Dataset.objects.filter(team__in=self.teams()).prefetch_related("versions")
        return Response(DatasetOutput(datasets, many=True).data)


class DatasetDetailApi(TeamScopedView):
    @extend_schema(responses=DatasetOutput)
    def get(self, request, pk: int):
        return Response(DatasetOutput(self.get_scoped(Dataset.objects.all(), pk)).data)

    @extend_schema(responses={204: None}, description="Delete a dataset no job uses (409 otherwise).")
    def delete(self, request, pk: int):
        dataset = self.get_scoped(Dataset.objects.all(), pk)
        self.check_write(dataset.team)
        try:
            dataset_delete(dataset=dataset, user=request.user)
        except InUse as exc:
            return _conflict(exc)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MappingInput(serializers.Serializer):
    prompt_field = serializers.CharField(default="prompt")
    answer_field = serializers.CharField(default="answer", allow_blank=True)
    tests_field = serializers.CharField(default="", allow_blank=True)
    domain_field = serializers.CharField(default="", allow_blank=True)
    difficulty_field = serializers.CharField(default="", allow_blank=True)
    prompt_format = serializers.ChoiceField(choices=["auto", "text", "chat"], default="auto")
    metadata_fields = serializers.CharField(
        default="", allow_blank=True, help_text="Comma-separated columns to keep; empty keeps every column."
    )
    tokenizer = serializers.CharField(default="tiny", help_text="Whose tokens the statistics count.")

    def mapping(self) -> dict:
        data = self.validated_data
        return {
            "prompt": data["prompt_field"],
            "answer": data["answer_field"],
            "tests": data["tests_field"],
            "domain": data["domain_field"],
            "difficulty": data["difficulty_field"],
            "prompt_format": data["prompt_format"],
            "metadata": data["metadata_fields"] or None,
        }


class UploadCreateApi(TeamScopedView):
    parser_classes = [MultiPartParser, FormParser]

    class UploadInput(MappingInput):
        file = serializers.FileField()
        name = serializers.CharField(max_length=200)
        map_later = serializers.BooleanField(
            default=False, help_text="Store the file and wait for POST …/mapping (the browser's flow)."
        )

    @extend_schema(
        request={"multipart/form-data": UploadInput},
        responses={202: DatasetUploadOutput, 413: OpenApiTypes.OBJECT},
        description="Upload JSONL, CSV or Parquet (each may be .gz). It is validated row by row in the "
        "background; poll the upload: `ready` (a new version), `review` (some rows bad: accept or reject), "
        "or `failed` (errors naming row and field; nothing stored). A file over ANNEAL_UPLOAD_MAX_MB is refused "
        "with 413, while it is still being sent.",
    )
    def post(self, request):
        team = self.writable_team()
        # A body over the limit never gets here: anneal.request_limits refused it while it streamed in.
        data = self.UploadInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            upload = dataset_upload_create(
                team=team,
                user=request.user,
                name=data.validated_data["name"],
                uploaded_file=data.validated_data["file"],
                mapping=None if data.validated_data["map_later"] else data.mapping(),
                tokenizer=data.validated_data["tokenizer"],
            )
        except FileTooLarge as exc:
            body = {"detail": str(exc), "errors": exc.errors}
            return Response(body, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
        return Response(DatasetUploadOutput(upload).data, status=status.HTTP_202_ACCEPTED)


class UploadListApi(TeamScopedView):
    @extend_schema(responses=DatasetUploadOutput(many=True))
    def get(self, request):
        uploads = DatasetUpload.objects.filter(team__in=self.teams())[:100]
        return Response(DatasetUploadOutput(uploads, many=True).data)


class UploadDetailApi(TeamScopedView):
    @extend_schema(responses=DatasetUploadOutput)
    def get(self, request, pk: int):
        return Response(DatasetUploadOutput(self.get_scoped(DatasetUpload.objects.all(), pk)).data)


class UploadPreviewApi(TeamScopedView):
    @extend_schema(
        responses=OpenApiTypes.OBJECT,
        description="The columns and first rows of an upload, to choose the mapping: "
        "{ready, columns, rows, problems, refused}. The worker reads them after the upload: until it has, "
        "`ready` is false and the lists are empty.",
    )
    def get(self, request, pk: int):
        preview = upload_preview(upload=self.get_scoped(DatasetUpload.objects.all(), pk))
        return Response({"ready": preview is not None, **(preview or UploadPreview()).to_dict()})


class UploadMappingApi(TeamScopedView):
    parser_classes = [JSONParser, FormParser, MultiPartParser]

    @extend_schema(request=MappingInput, responses={202: DatasetUploadOutput})
    def post(self, request, pk: int):
        upload = self.get_scoped(DatasetUpload.objects.all(), pk)
        self.check_write(upload.team)
        data = MappingInput(data=request.data)
        data.is_valid(raise_exception=True)
        upload = dataset_upload_map(
            upload=upload,
            user=request.user,
            mapping=data.mapping(),
            tokenizer=data.validated_data["tokenizer"],
        )
        return Response(DatasetUploadOutput(upload).data, status=status.HTTP_202_ACCEPTED)


class UploadErrorsApi(TeamScopedView):
    class ErrorParams(serializers.Serializer):
        offset = serializers.IntegerField(min_value=0, default=0)
        limit = serializers.IntegerField(min_value=1, max_value=1000, default=100)

    @extend_schema(
        parameters=[ErrorParams],
        responses=OpenApiTypes.OBJECT,
        description="Every error, paged: {count, offset, results: [{row, field, message}]}.",
    )
    def get(self, request, pk: int):
        upload = self.get_scoped(DatasetUpload.objects.all(), pk)
        params = self.ErrorParams(data=request.query_params)
        params.is_valid(raise_exception=True)
        offset, limit = params.validated_data["offset"], params.validated_data["limit"]
        page = []
        for index, error in enumerate(upload_errors(upload=upload)):
            if index >= offset + limit:
                break
            if index >= offset:
                page.append(error)
        return Response({"count": upload.error_count, "offset": offset, "results": page})


class UploadErrorsCsvApi(TeamScopedView):
    @extend_schema(responses={(200, "text/csv"): str}, description="Every error as a CSV download.")
    def get(self, request, pk: int):
        upload = self.get_scoped(DatasetUpload.objects.all(), pk)
        # Data leaving the platform is audited: who took which file's rows out.
        audit(team=upload.team, user=request.user, action="upload.errors_export", obj=upload)
        response = StreamingHttpResponse(upload_errors_csv(upload=upload), content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="upload-{upload.pk}-errors.csv"'
        return response


class UploadAcceptApi(TeamScopedView):
    @extend_schema(
        request=None, responses={201: DatasetVersionOutput}, description="Keep the valid rows as a version."
    )
    def post(self, request, pk: int):
        upload = self.get_scoped(DatasetUpload.objects.all(), pk)
        self.check_write(upload.team)
        version = dataset_upload_accept(upload=upload, user=request.user)
        return Response(DatasetVersionOutput(version).data, status=status.HTTP_201_CREATED)


class UploadRejectApi(TeamScopedView):
    @extend_schema(
        request=None, responses=DatasetUploadOutput, description="Drop the upload: nothing is stored."
    )
    def post(self, request, pk: int):
        upload = self.get_scoped(DatasetUpload.objects.all(), pk)
        self.check_write(upload.team)
        return Response(DatasetUploadOutput(dataset_upload_reject(upload=upload, user=request.user)).data)


class VersionListApi(TeamScopedView):
    @extend_schema(responses=DatasetVersionOutput(many=True))
    def get(self, request, pk: int):
        dataset = self.get_scoped(Dataset.objects.all(), pk)
        return Response(DatasetVersionOutput(dataset.versions.order_by("-number"), many=True).data)


class VersionDetailApi(TeamScopedView):
    @extend_schema(responses=DatasetVersionOutput)
    def get(self, request, pk: int):
        version = self.get_scoped(DatasetVersion.objects.all(), pk, team_path="dataset__team")
        return Response(DatasetVersionOutput(version).data)

    @extend_schema(responses={204: None}, description="Delete a version no job uses (409 otherwise).")
    def delete(self, request, pk: int):
        version = self.get_scoped(DatasetVersion.objects.all(), pk, team_path="dataset__team")
        self.check_write(version.dataset.team)
        try:
            dataset_version_delete(version=version, user=request.user)
        except InUse as exc:
            return _conflict(exc)
        return Response(status=status.HTTP_204_NO_CONTENT)


class VersionRowsApi(TeamScopedView):
    class Params(serializers.Serializer):
        offset = serializers.IntegerField(min_value=0, default=0)
        limit = serializers.IntegerField(min_value=1, max_value=1000, default=100)

    @extend_schema(parameters=[Params], responses=OpenApiTypes.OBJECT, description="{count, offset, results}")
    def get(self, request, pk: int):
        version = self.get_scoped(DatasetVersion.objects.all(), pk, team_path="dataset__team")
        params = self.Params(data=request.query_params)
        params.is_valid(raise_exception=True)
        offset, limit = params.validated_data["offset"], params.validated_data["limit"]
        rows = read_rows(version.rows_path, offset=offset, limit=limit)
        audit(
            team=version.dataset.team,
            user=request.user,
            action="dataset_version.rows_export",
            obj=version,
            offset=offset,
            rows=len(rows),
        )
        return Response({"count": version.row_count, "offset": offset, "results": rows})


class VersionSplitApi(TeamScopedView):
    class SplitInput(serializers.Serializer):
        method = serializers.ChoiceField(choices=METHODS)
        eval_fraction = serializers.FloatField(default=0.1)
        seed = serializers.IntegerField(default=0, min_value=0)
        column = serializers.CharField(default="", allow_blank=True)
        eval_values = serializers.ListField(child=serializers.CharField(), default=list)

    @extend_schema(
        request=SplitInput,
        responses={201: DatasetVersionOutput(many=True)},
        description="Make a train and an eval version from this one, by seed (eval_fraction) or by a column "
        "(rows whose value is in eval_values go to eval).",
    )
    def post(self, request, pk: int):
        version = self.get_scoped(DatasetVersion.objects.all(), pk, team_path="dataset__team")
        self.check_write(version.dataset.team)
        data = self.SplitInput(data=request.data)
        data.is_valid(raise_exception=True)
        train, held_out = dataset_version_split(version=version, user=request.user, **data.validated_data)
        return Response(
            DatasetVersionOutput([train, held_out], many=True).data, status=status.HTTP_201_CREATED
        )


class PackListApi(TeamScopedView):
    @extend_schema(
        responses=OpenApiTypes.OBJECT,
        description="The reasoning-gym tasks offered (each passed its check): {tasks, max_rows, max_difficulty}.",
    )
    def get(self, request):
        tasks = [{"task": c.task, "has_curriculum": c.has_curriculum} for c in offered_tasks()]
        return Response({"tasks": tasks, "max_rows": MAX_PACK_ROWS, "max_difficulty": MAX_DIFFICULTY})


class PackCreateApi(TeamScopedView):
    class PackInput(serializers.Serializer):
        name = serializers.CharField(max_length=200)
        tasks = serializers.ListField(child=serializers.CharField(), min_length=1)
        size = serializers.IntegerField(default=100)
        seed = serializers.IntegerField(default=0)
        difficulty = serializers.IntegerField(default=None, allow_null=True)

    @extend_schema(
        request=PackInput,
        responses={201: OpenApiTypes.OBJECT},
        description="Make a dataset version of the tasks and a verifier per task: "
        "{dataset_version, verifiers: [{id, name, version}], dropped}.",
    )
    def post(self, request):
        team = self.writable_team()
        data = self.PackInput(data=request.data)
        data.is_valid(raise_exception=True)
        result = domain_pack_create(team=team, user=request.user, **data.validated_data)
        body = {
            "dataset_version": DatasetVersionOutput(result.version).data,
            "verifiers": [
                {"id": v.id, "name": v.name, "version": v.latest_version.id} for v in result.verifiers
            ],
            "dropped": result.dropped,
        }
        return Response(body, status=status.HTTP_201_CREATED)


class AgentPackCreateApi(TeamScopedView):
    """The repo-fix task pack for agent jobs (gpu_jobs.agent.taskpack) as a dataset version."""

    class AgentPackInput(serializers.Serializer):
        name = serializers.CharField()
        limit = serializers.IntegerField(default=None, allow_null=True)
        offset = serializers.IntegerField(default=0)
        mutants = serializers.IntegerField(default=0)

    @extend_schema(
        request=AgentPackInput,
        responses={201: OpenApiTypes.OBJECT},
        description="Make a dataset version of the repo-fix task pack (small repositories with a planted bug "
        "and their tests; train on it with an environment job): {dataset_version}. limit tasks from the "
        "offset-th on (all by default): e.g. offset 0 limit 12 to train and offset 12 limit 8 as the held-out "
        "set (eval_dataset_version) of repositories the job never trains on. mutants (0 by default, at most "
        "32): each task followed by up to that many other bugs in its repository that its tests catch, for more "
        "training tasks without more repositories.",
    )
    def post(self, request):
        from anneal.datasets.pack_services import agent_task_pack_create

        team = self.writable_team()
        data = self.AgentPackInput(data=request.data)
        data.is_valid(raise_exception=True)
        version = agent_task_pack_create(team=team, user=request.user, **data.validated_data)
        return Response(
            {"dataset_version": DatasetVersionOutput(version).data}, status=status.HTTP_201_CREATED
        )
