from django.contrib import admin

from anneal.accounts.login import AdminSignInForm
from anneal.accounts.models import ApiToken, AuditEntry, Membership, Organisation, Team

# The admin's sign-in has the same lockout and audit trail as the sign-in page.
admin.site.login_form = AdminSignInForm


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Organisation)
class OrganisationAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "organisation", "created_at"]
    list_filter = ["organisation"]
    search_fields = ["name", "organisation__name"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "team", "role", "created_at"]
    list_filter = ["role", "team"]
    search_fields = ["user__username", "team__name"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "key_hint", "user", "team", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["team"]
    search_fields = ["name", "user__username", "key_hint"]
    readonly_fields = ["key_hash", "key_hint", "created_at", "last_used_at"]


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = ["created_at", "user", "team", "action", "object_type", "object_id"]
    list_filter = ["action", "team"]
    search_fields = ["action", "user__username", "object_id"]
    readonly_fields = [f.name for f in AuditEntry._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        # The audit log is evidence: nobody, superusers included, edits or deletes it from the admin.
        return False
