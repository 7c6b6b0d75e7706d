from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response

from anneal.api_base import TeamScopedView
from anneal.datasets.ingest import read_rows
from anneal.datasets.models import Dataset, DatasetUpload, DatasetVersion
from anneal.datasets.services import dataset_upload_create


class VersionOutput(serializers.ModelSerializer):
    class Meta:
        model = DatasetVersion
        fields = ["id", "number", "row_count", "columns", "sha256", "created_at"]


class DatasetOutput(serializers.ModelSerializer):
    versions = VersionOutput(many=True, read_only=True)

    class Meta:
        model = Dataset
        fields = ["id", "name", "description", "created_at", "versions"]


class UploadOutput(serializers.ModelSerializer):
    dataset_version = serializers.SerializerMethodField()

    class Meta:
        model = DatasetUpload
        fields = [
            "id",
            "dataset_name",
            "file_name",
            "size_bytes",
            "mapping",
            "state",
            "rows_seen",
            "error_count",
            "errors",
            "dataset_version",
            "created_at",
            "finished_at",
        ]

    def get_dataset_version(self, upload) -> int | None:
        version = DatasetVersion.objects.filter(source_upload=upload).first()
        return version.id if version else None


class DatasetListApi(TeamScopedView):
    @extend_schema(responses=DatasetOutput(many=True))
    def get(self, request):
        datasets = Dataset.objects.filter(team__in=self.teams()).prefetch_related("versions")
        return Response(DatasetOutput(datasets, many=True).data)


class DatasetDetailApi(TeamScopedView):
    @extend_schema(responses=DatasetOutput)
    def get(self, request, pk: int):
        return Response(DatasetOutput(self.get_scoped(Dataset.objects.all(), pk)).data)


class UploadCreateApi(TeamScopedView):
    parser_classes = [MultiPartParser, FormParser]

    class Input(serializers.Serializer):
        file = serializers.FileField()
        name = serializers.CharField(max_length=200)
        prompt_field = serializers.CharField(default="prompt")
        answer_field = serializers.CharField(default="answer", allow_blank=True)

    @extend_schema(
        request={"multipart/form-data": Input},
        responses={202: UploadOutput},
        description="Upload a JSONL file; it is validated row by row in the background. Poll the upload for "
        "its state: `ready` (with the new dataset version) or `failed` (with errors naming row and field).",
    )
    def post(self, request):
        team = self.writable_team()
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        upload = dataset_upload_create(
            team=team,
            user=request.user,
            name=data.validated_data["name"],
            uploaded_file=data.validated_data["file"],
            mapping={
                "prompt": data.validated_data["prompt_field"],
                "answer": data.validated_data["answer_field"],
            },
        )
        return Response(UploadOutput(upload).data, status=status.HTTP_202_ACCEPTED)


class UploadDetailApi(TeamScopedView):
    @extend_schema(responses=UploadOutput)
    def get(self, request, pk: int):
        return Response(UploadOutput(self.get_scoped(DatasetUpload.objects.all(), pk)).data)


class VersionRowsApi(TeamScopedView):
    class Params(serializers.Serializer):
        offset = serializers.IntegerField(min_value=0, default=0)
        limit = serializers.IntegerField(min_value=1, max_value=1000, default=100)

    @extend_schema(parameters=[Params])
    def get(self, request, pk: int):
        version = self.get_scoped(DatasetVersion.objects.all(), pk, team_path="dataset__team")
        params = self.Params(data=request.query_params)
        params.is_valid(raise_exception=True)
        offset, limit = params.validated_data["offset"], params.validated_data["limit"]
        rows = read_rows(version.rows_path, offset=offset, limit=limit)
        return Response({"count": version.row_count, "offset": offset, "results": rows})
