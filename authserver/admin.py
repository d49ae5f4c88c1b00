"""The admin's user list tells people who keep a codex from the staff who run the server; the
policy page shows the operator's policy in force; the headless agents' list lets an operator
revoke one whose owner cannot be reached in time (a leaked secret)."""

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from authserver.clients import agents
from authserver.core import policy
from authserver.models import HeadlessAgent

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


@admin.register(HeadlessAgent)
class HeadlessAgentAdmin(admin.ModelAdmin):
    """Every person's headless agents, read-only: an edit here would bypass ``authserver.clients.agents``
    (the cap, the keys, the audit line). Revoking goes through ``agents.agent_revoke`` as the
    owner's own revocation does (tokens deleted, credentials emptied, one ``agent.revoked`` line
    ``by=operator``), and only a superuser may: staff given the view permission may look."""

    list_display = ("name", "owner", "client_id", "scopes", "authentication", "created", "revoked")
    list_filter = (("revoked", admin.EmptyFieldListFilter),)
    search_fields = ("name", "owner__username", "owner__email", "application__client_id")
    ordering = ("-created",)
    actions = ("revoke_agents",)
    fields = list_display

    def get_queryset(self, request: HttpRequest) -> QuerySet[HeadlessAgent]:
        return super().get_queryset(request).select_related("owner", "application")

    @admin.display(description="client id", ordering="application__client_id")
    def client_id(self, agent: HeadlessAgent) -> str:
        return agent.application.client_id

    @admin.display(description="signs in with")
    def authentication(self, agent: HeadlessAgent) -> str:
        if agent.revoked is not None:
            return "nothing (revoked)"
        return "a secret" if agent.application.client_secret else "its public key (private_key_jwt)"

    @admin.action(description="Revoke the selected agents (their tokens stop at once)", permissions=["revoke"])
    def revoke_agents(self, request: HttpRequest, queryset: QuerySet[HeadlessAgent]) -> None:
        selected = list(queryset)
        revoked = sum(agents.agent_revoke(agent=agent, by="operator") for agent in selected)
        words = f"Revoked {revoked} agent{'' if revoked == 1 else 's'}."
        if already := len(selected) - revoked:
            words += f" {already} {'was' if already == 1 else 'were'} revoked already."
        self.message_user(request, words, messages.SUCCESS)

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


def policy_page(request: HttpRequest) -> HttpResponse:
    """The operator's policy in force (authserver.core.policy), read-only: each setting, its effective
    value and what it refuses. Staff only (``admin.site.admin_view`` in codex_site.urls)."""
    context = {
        **admin.site.each_context(request),
        "title": "The operator's policy",
        "settings": policy.effective(),
        "providers": policy.id_jag_providers(),
    }
    return TemplateResponse(request, "admin/policy.html", context)
