"""The admin's user list tells people who keep a codex from the staff who run the server."""

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin

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
