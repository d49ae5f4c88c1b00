"""Operators' view of codexes. Read-only: an edit here would bypass the services,
skipping revisions, fingerprints and the search columns."""

import uuid

from django.conf import settings
from django.contrib import admin
from django.db.models import Max, QuerySet
from django.http import HttpRequest
from django.template.defaultfilters import filesizeformat

from notebook.models import Codex, Entry, EntryRevision, EntryTag, RequestKey
from notebook.writers import APPLICATION, UNKNOWN


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Codex)
class CodexAdmin(ReadOnlyAdmin):
    list_display = ["owner", "entry_count", "stored", "quota_used", "last_activity", "created_at"]
    search_fields = ["owner__username", "owner__email"]
    ordering = ["owner__username"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Codex]:
        # entry_count and stored_bytes are columns the services keep (notebook.quotas).
        return super().get_queryset(request).select_related("owner").annotate(last_activity=Max("entries__updated_at"))

    @admin.display(description="stored", ordering="stored_bytes")
    def stored(self, codex: Codex) -> str:
        return filesizeformat(codex.stored_bytes)

    @admin.display(description="quota used")
    def quota_used(self, codex: Codex) -> str:
        entries = codex.entry_count / settings.CODEX_QUOTA_ENTRIES
        stored = codex.stored_bytes / settings.CODEX_QUOTA_STORED_BYTES
        return f"entries {entries:.1%}, bytes {stored:.1%}"

    @admin.display(description="last activity", ordering="last_activity")
    def last_activity(self, codex: Codex):
        return codex.last_activity  # type: ignore[attr-defined]


class EntryRevisionInline(ReadOnlyInline):
    model = EntryRevision
    fields = ["revision", "written_by", "title", "content", "tags", "related_agent_ids", "provenance", "recorded_at"]
    readonly_fields = fields
    ordering = ["-revision"]

    @admin.display(description="written by")
    def written_by(self, revision: EntryRevision) -> str:
        """The writer frozen on the revision: name, client id and token scopes (notebook.writers)."""
        writer = revision.writer
        if writer.kind == UNKNOWN:
            return writer.label
        details = [f"client id {writer.client_id}"] if writer.client_id else []
        if writer.scopes:
            details.append(f"scopes {writer.scopes}")
        if writer.kind == APPLICATION and writer.application_id is None:
            details.append("application since deleted")
        return f"{writer.label} ({'; '.join(details)})" if details else writer.label


class TagFilter(admin.SimpleListFilter):
    """Exact, case-sensitive tag filter, served by the tag index."""

    title = "tag"
    parameter_name = "tag"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin):
        values = EntryTag.objects.values_list("value", flat=True).distinct().order_by("value")[:50]
        return [(value, value) for value in values]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Entry]) -> QuerySet[Entry]:
        if self.value():
            return queryset.filter(tag_rows__value=self.value())
        return queryset


@admin.register(Entry)
class EntryAdmin(ReadOnlyAdmin):
    list_display = ["id", "title", "codex", "revision", "content_bytes", "updated_at"]
    list_filter = [("codex", admin.RelatedOnlyFieldListFilter), TagFilter]
    search_fields = ["=id", "title"]
    ordering = ["id"]
    exclude = ["search_title", "search_content", "search_tags", "search_tags_text"]
    inlines = [EntryRevisionInline]

    def get_search_results(self, request: HttpRequest, queryset: QuerySet[Entry], search_term: str):
        # "=id" on a UUID field raises on text that is not a UUID; search titles only then.
        term = search_term.strip()
        if not term:
            return queryset, False
        try:
            uuid.UUID(term)
        except ValueError:
            return queryset.filter(title__icontains=term), False
        return super().get_search_results(request, queryset, search_term)


@admin.register(RequestKey)
class RequestKeyAdmin(ReadOnlyAdmin):
    list_display = ["request_id", "codex", "entry", "fingerprint", "created_at"]
    list_filter = [("codex", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["request_id"]
    ordering = ["-created_at"]
