"""The notebook's tables. Every invariant the services rely on is also a named
database constraint, so that no code path (admin, shell, a future bug) can
store an entry the contract forbids."""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from oauth2_provider.settings import oauth2_settings

from notebook.limits import (
    CONTENT_MAX_BYTES,
    RELATED_AGENT_MAX_CHARS,
    REQUEST_ID_MAX_CHARS,
    TAG_MAX_CHARS,
    TITLE_MAX_CHARS,
    WRITER_FIELD_MAX_CHARS,
)
from notebook.writers import APPLICATION, KINDS, UNKNOWN, Writer

# Joins an entry's normalized tags in ``Entry.search_tags_text``. Tags hold no
# control characters, so a newline never comes from a tag itself.
SEARCH_TAGS_SEPARATOR = "\n"


class Codex(models.Model):
    """One person's notebook. Created on that person's first authorized call."""

    owner = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="codex")
    created_at = models.DateTimeField(auto_now_add=True)
    # Usage, kept by the services in the same transaction as each write (notebook.quotas),
    # so a quota check never counts rows.
    entry_count = models.PositiveBigIntegerField(default=0, help_text="Entries in this codex")
    stored_bytes = models.PositiveBigIntegerField(
        default=0, help_text="Bytes of entry input stored, every revision counted (notebook.quotas.input_bytes)"
    )
    # Counts this codex's saves and updates (notebook.quotas.charge raises it in the same
    # UPDATE that takes the codex row's lock): each write's number, kept in Entry.write_seq.
    last_write_seq = models.PositiveBigIntegerField(default=0, help_text="Saves and updates made in this codex")

    class Meta:
        verbose_name_plural = "codexes"

    def __str__(self) -> str:
        return f"codex of {self.owner}"


class Entry(models.Model):
    """The current state of one field note.

    ``tags``, ``related_agent_ids`` and ``provenance`` hold exactly what the
    agent sent (order kept). The ``search_*`` columns hold the NFKC-normalized,
    case-folded text that search compares against; they are derived on every
    write by the services and never shown. ``search_tags_text`` is the same
    normalized tags joined by newlines, one text column a trigram index can
    cover (migration 0002); since a match must not span two tags, it only
    narrows candidates and ``search_tags`` decides.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No single-column index on the foreign keys of the notebook tables (db_index=False)
    # where a composite index or unique constraint already leads with the column: every
    # save and update paid to maintain both (migration 0006). Here: notebook_entry_unique_per_codex.
    codex = models.ForeignKey(Codex, on_delete=models.CASCADE, related_name="entries", db_index=False)
    revision = models.PositiveIntegerField()
    title = models.CharField(max_length=TITLE_MAX_CHARS, null=True, blank=True)
    content = models.TextField()
    content_bytes = models.PositiveIntegerField()
    tags = models.JSONField(default=list)
    related_agent_ids = models.JSONField(default=list)
    provenance = models.JSONField(null=True, blank=True)
    search_title = models.TextField(default="", blank=True)
    search_content = models.TextField(default="", blank=True)
    search_tags = models.JSONField(default=list)
    search_tags_text = models.TextField(default="", blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    # The codex's write number of this entry's last save or update (Codex.last_write_seq):
    # unique within the codex and growing in the order the writes took the codex row's lock,
    # so writes of one millisecond (updated_at is kept to the millisecond) stay in order.
    write_seq = models.PositiveBigIntegerField(default=0)

    class Meta:
        verbose_name_plural = "entries"
        indexes = [
            # The person's pages list a codex newest first with keyset paging on
            # (updated_at, write_seq): the write order breaks a tie of one millisecond.
            models.Index(fields=["codex", "-updated_at", "-write_seq"], name="notebook_entry_codex_recent"),
        ]
        constraints = [
            # Search walks a codex in id order; this index serves that walk. Unique, as the
            # primary key a table distributed by codex needs is (codex_id, id) (migration 0011,
            # docs/capacity.md): that key can then be made from this index, and the other
            # notebook tables' foreign keys can name it.
            models.UniqueConstraint(fields=["codex", "id"], name="notebook_entry_unique_per_codex"),
            models.CheckConstraint(condition=Q(revision__gte=1), name="notebook_entry_revision_positive"),
            models.CheckConstraint(
                condition=Q(content_bytes__gte=1, content_bytes__lte=CONTENT_MAX_BYTES),
                name="notebook_entry_content_bytes_in_range",
            ),
            models.CheckConstraint(
                condition=~Q(title=""),
                name="notebook_entry_title_not_empty",
            ),
            models.CheckConstraint(
                condition=Q(updated_at__gte=models.F("created_at")),
                name="notebook_entry_updated_after_created",
            ),
        ]

    def __str__(self) -> str:
        return self.title or str(self.id)


class EntryRevision(models.Model):
    """A full snapshot of an entry as it was at one revision (for operators)."""

    # The entry's codex, denormalized like EntryTag's: every notebook table carries
    # codex_id, so the tables can be distributed by codex (docs/capacity.md).
    # Indexed by notebook_entryrevision_writer (codex, ...) and the unique (entry, revision, codex).
    codex = models.ForeignKey(Codex, on_delete=models.CASCADE, related_name="+", db_index=False)
    entry = models.ForeignKey(Entry, on_delete=models.CASCADE, related_name="revisions", db_index=False)
    revision = models.PositiveIntegerField()
    title = models.CharField(max_length=TITLE_MAX_CHARS, null=True, blank=True)
    content = models.TextField()
    tags = models.JSONField(default=list)
    related_agent_ids = models.JSONField(default=list)
    provenance = models.JSONField(null=True, blank=True)
    recorded_at = models.DateTimeField()
    # Who wrote this revision (notebook.writers), frozen when it was recorded: the
    # application's client id, name and the token's scopes are copies, so they survive the
    # application being renamed or deleted (the link then becomes NULL).
    writer_kind = models.CharField(max_length=16, choices=[(kind, kind) for kind in KINDS], default=UNKNOWN)
    writer_application = models.ForeignKey(
        oauth2_settings.APPLICATION_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    writer_client_id = models.CharField(max_length=WRITER_FIELD_MAX_CHARS, default="", blank=True)
    writer_name = models.CharField(max_length=WRITER_FIELD_MAX_CHARS, default="", blank=True)
    writer_scopes = models.CharField(max_length=WRITER_FIELD_MAX_CHARS, default="", blank=True)

    class Meta:
        ordering = ["entry", "-revision"]
        indexes = [
            # "What did this application write?": the person's ?app= filter and the counts on
            # the connected-applications page look revisions up by client id, then join the
            # entry for its codex. (Once revisions carry their codex, (codex, client id) is better.)
            models.Index(fields=["codex", "writer_client_id", "entry"], name="notebook_entryrevision_writer"),
        ]
        constraints = [
            # The codex last: a table distributed by codex needs it in every unique key, and
            # lookups by entry alone (Django's cascades, the admin) keep this index.
            models.UniqueConstraint(
                fields=["entry", "revision", "codex"], name="notebook_entryrevision_unique_per_entry"
            ),
            models.CheckConstraint(condition=Q(revision__gte=1), name="notebook_entryrevision_revision_positive"),
            models.CheckConstraint(condition=Q(writer_kind__in=KINDS), name="notebook_entryrevision_writer_kind_known"),
            models.CheckConstraint(
                condition=~Q(writer_kind=APPLICATION) | ~Q(writer_client_id=""),
                name="notebook_entryrevision_application_writer_has_client_id",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.entry_id} r{self.revision}"

    @property
    def writer(self) -> Writer:
        return Writer(
            self.writer_kind, self.writer_application_id, self.writer_client_id, self.writer_name, self.writer_scopes
        )


class EntryTag(models.Model):
    """An exact index of one entry's tags, so a tag filter narrows candidates
    in the database. The entry's ``tags`` list stays the source of truth."""

    # Indexed by notebook_entrytag_lookup (codex, ...) and the unique (entry, value, codex).
    codex = models.ForeignKey(Codex, on_delete=models.CASCADE, related_name="+", db_index=False)
    entry = models.ForeignKey(Entry, on_delete=models.CASCADE, related_name="tag_rows", db_index=False)
    value = models.CharField(max_length=TAG_MAX_CHARS)

    class Meta:
        indexes = [models.Index(fields=["codex", "value", "entry"], name="notebook_entrytag_lookup")]
        constraints = [
            # With the codex, last, as the revisions' (EntryRevision).
            models.UniqueConstraint(fields=["entry", "value", "codex"], name="notebook_entrytag_unique_per_entry"),
            models.CheckConstraint(condition=~Q(value=""), name="notebook_entrytag_not_empty"),
        ]


class EntryRelatedAgent(models.Model):
    """An exact index of one entry's related agent ids (see ``EntryTag``)."""

    # Indexed by notebook_entryagent_lookup (codex, ...) and the unique (entry, value, codex).
    codex = models.ForeignKey(Codex, on_delete=models.CASCADE, related_name="+", db_index=False)
    entry = models.ForeignKey(Entry, on_delete=models.CASCADE, related_name="related_agent_rows", db_index=False)
    value = models.CharField(max_length=RELATED_AGENT_MAX_CHARS)

    class Meta:
        indexes = [models.Index(fields=["codex", "value", "entry"], name="notebook_entryagent_lookup")]
        constraints = [
            # With the codex, last, as the revisions' (EntryRevision).
            models.UniqueConstraint(fields=["entry", "value", "codex"], name="notebook_entryagent_unique_per_entry"),
            models.CheckConstraint(condition=~Q(value=""), name="notebook_entryagent_not_empty"),
        ]


class RequestKey(models.Model):
    """Remembers which entry a save's request id created, and what input it carried."""

    # Indexed by the unique (codex, request_id). ``entry`` keeps its index: deletes find
    # an entry's keys by it.
    codex = models.ForeignKey(Codex, on_delete=models.CASCADE, related_name="request_keys", db_index=False)
    request_id = models.CharField(max_length=REQUEST_ID_MAX_CHARS)
    fingerprint = models.CharField(max_length=64, help_text="SHA-256 of the canonical JSON of the entry input")
    entry = models.ForeignKey(Entry, on_delete=models.CASCADE, related_name="request_keys")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["codex", "request_id"], name="notebook_requestkey_unique_per_codex"),
            models.CheckConstraint(condition=~Q(request_id=""), name="notebook_requestkey_request_id_not_empty"),
        ]

    def __str__(self) -> str:
        return self.request_id
