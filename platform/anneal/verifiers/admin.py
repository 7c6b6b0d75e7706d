from django.contrib import admin

from anneal.verifiers.models import Verifier, VerifierVersion


class VersionInline(admin.TabularInline):
    model = VerifierVersion
    extra = 0
    fields = ["number", "spec", "created_at"]
    readonly_fields = fields
    can_delete = False


@admin.register(Verifier)
class VerifierAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "created_by", "created_at"]
    list_filter = ["team"]
    search_fields = ["name"]
    inlines = [VersionInline]


@admin.register(VerifierVersion)
class VerifierVersionAdmin(admin.ModelAdmin):
    list_display = ["verifier", "number", "kind", "created_at"]
    list_filter = ["verifier__team"]
    search_fields = ["verifier__name"]
