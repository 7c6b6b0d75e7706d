"""REST for the long-context packs (gpu_jobs.long_context): the families offered, and making a pack."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from anneal.api_base import TeamScopedView
from anneal.datasets.api import DatasetVersionOutput
from anneal.datasets.pack_catalogue import long_context_checks
from anneal.datasets.pack_services import long_context_pack_create
from gpu_jobs.long_context import FAMILIES, MAX_LENGTH, MIN_LENGTH, STANDARD_LENGTHS
from gpu_jobs.long_context.families import MAX_FAMILY_ROWS, MAX_PACK_TOKENS


class LongContextPackApi(TeamScopedView):
    class LongContextPackInput(serializers.Serializer):
        name = serializers.CharField(max_length=200)
        families = serializers.ListField(child=serializers.CharField(), min_length=1)
        lengths = serializers.ListField(child=serializers.IntegerField(), min_length=1)
        size = serializers.IntegerField(default=10, help_text="Rows per family and length.")
        seed = serializers.IntegerField(default=0)
        tokenizer = serializers.CharField(
            default="tiny", help_text="Whose tokens the lengths count: tiny, or a model folder of the store."
        )

    @extend_schema(
        responses=OpenApiTypes.OBJECT,
        description="The long-context families offered (each passed its check) and the limits of a pack: "
        "{families: [{family, summary, min_length, verifier}], min_length, max_length, lengths, max_rows, "
        "max_tokens}.",
    )
    def get(self, request):
        checks = long_context_checks()
        families = [
            {"family": name, "summary": f.summary, "min_length": f.min_length, "verifier": f.spec}
            for name, f in FAMILIES.items()
            if checks[name].ok
        ]
        return Response(
            {
                "families": families,
                "min_length": MIN_LENGTH,
                "max_length": MAX_LENGTH,
                "lengths": list(STANDARD_LENGTHS),
                "max_rows": MAX_FAMILY_ROWS,
                "max_tokens": MAX_PACK_TOKENS,
            }
        )

    @extend_schema(
        request=LongContextPackInput,
        responses={201: OpenApiTypes.OBJECT},
        description="Make a dataset version of long-context rows (every family at every length, size rows "
        "each; every row carries domain, length_bucket and prompt_tokens) and a verifier per family: "
        "{dataset_version, verifiers: [{id, name, version}]}.",
    )
    def post(self, request):
        team = self.writable_team()
        data = self.LongContextPackInput(data=request.data)
        data.is_valid(raise_exception=True)
        result = long_context_pack_create(team=team, user=request.user, **data.validated_data)
        body = {
            "dataset_version": DatasetVersionOutput(result.version).data,
            "verifiers": [
                {"id": v.id, "name": v.name, "version": v.latest_version.id} for v in result.verifiers
            ],
        }
        return Response(body, status=status.HTTP_201_CREATED)
