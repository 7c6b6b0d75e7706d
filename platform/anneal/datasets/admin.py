from django.contrib import admin

from anneal.datasets.models import Dataset, DatasetUpload, DatasetVersion


class VersionInline(admin.TabularInline):
    model = DatasetVersion
    extra = 0
    fields = ["number", "row_count", "sha256", "created_at"]
    readonly_fields = fields
    can_delete = False


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "created_by", "created_at"]
    list_filter = ["team"]
    search_fields = ["name"]
    inlines = [VersionInline]


@admin.register(DatasetVersion)
class DatasetVersionAdmin(admin.ModelAdmin):
    list_display = ["dataset", "number", "row_count", "created_at"]
    list_filter = ["dataset__team"]
    search_fields = ["dataset__name", "sha256"]
    readonly_fields = ["dataset", "number", "row_count", "columns", "sha256", "rows_path", "source_upload"]


@admin.register(DatasetUpload)
class DatasetUploadAdmin(admin.ModelAdmin):
    list_display = ["file_name", "dataset_name", "team", "state", "rows_seen", "error_count", "created_at"]
    list_filter = ["state", "team"]
    search_fields = ["file_name", "dataset_name"]
