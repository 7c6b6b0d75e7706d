from django.contrib import admin

from anneal.deployments.models import Deployment


@admin.register(Deployment)
class DeploymentAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "tier", "state", "replicas", "created_at"]
    list_filter = ["tier", "state", "team"]
    search_fields = ["name"]
