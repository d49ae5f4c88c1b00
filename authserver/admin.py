"""The admin's user list tells people who keep a codex from the staff who run the server; the
policy page shows the operator's policy in force."""

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from authserver import policy

User = get_user_model()


@admin.display(description="role", ordering="-is_superuser")
def role(user) -> str:
    if user.is_superuser:
        return "Operator (superuser)"
    return "Staff" if user.is_staff else "Person"


class CodexUserAdmin(UserAdmin):
    list_display = ("username", role, "email", "is_active", "last_login", "date_joined")
    list_filter = ("is_staff", "is_superuser", "is_active")


admin.site.unregister(User)
admin.site.register(User, CodexUserAdmin)


def policy_page(request: HttpRequest) -> HttpResponse:
    """The operator's policy in force (authserver.policy), read-only: each setting, its effective
    value and what it refuses. Staff only (``admin.site.admin_view`` in codex_site.urls)."""
    context = {
        **admin.site.each_context(request),
        "title": "The operator's policy",
        "settings": policy.effective(),
        "providers": policy.id_jag_providers(),
    }
    return TemplateResponse(request, "admin/policy.html", context)
