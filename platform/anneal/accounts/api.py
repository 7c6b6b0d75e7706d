from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from anneal.accounts.models import ApiToken
from anneal.accounts.selectors import role_in
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
