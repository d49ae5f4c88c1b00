"""Who wrote a revision: the connected application behind the token of the call, frozen on
the revision when it is recorded (docs/data.md, "Who wrote it").

The notebook does not read tokens; ``mcp_endpoint`` builds a ``Writer`` from the grant it
checked and hands it to the services, which store it with the snapshot. The name, client id
and scopes are copied, not looked up later, so a renamed or deleted application still shows
what it was called when it wrote.
"""

from dataclasses import dataclass
from typing import Any

from notebook.limits import WRITER_FIELD_MAX_CHARS

# How a revision came to be: through a tool call of a connected application, through an
# import of an export file, or before writers were recorded (the migration's backfill).
APPLICATION = "application"
IMPORT = "import"
UNKNOWN = "unknown"
KINDS = (APPLICATION, IMPORT, UNKNOWN)


@dataclass(frozen=True)
class Writer:
    """The writer of one revision. ``client_id``/``name``/``scopes`` are those of the
    application at the time of writing; for an import they are the writer the export file
    named, if any (informational: never linked to an application of this server)."""

    kind: str
    application_id: int | None = None
    client_id: str = ""
    name: str = ""
    scopes: str = ""  # space-separated, sorted

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"writer kind must be one of {', '.join(KINDS)}")
        if self.kind == APPLICATION and not self.client_id:
            raise ValueError("an application writer needs its client id")
        for value in (self.client_id, self.name, self.scopes):
            if len(value) > WRITER_FIELD_MAX_CHARS:
                raise ValueError(f"writer fields are at most {WRITER_FIELD_MAX_CHARS} characters")

    @classmethod
    def application(cls, *, application_id: int, client_id: str, name: str, scopes: frozenset[str]) -> "Writer":
        return cls(APPLICATION, application_id, client_id, name[:WRITER_FIELD_MAX_CHARS], " ".join(sorted(scopes)))

    @property
    def label(self) -> str:
        """What a person reads after "written by"."""
        if self.kind == APPLICATION:
            return self.name or self.client_id
        if self.kind == IMPORT:
            return f"an import (originally {self.name or self.client_id})" if self.client_id else "an import"
        return "an unknown application (written before writers were recorded)"

    @property
    def identity(self) -> tuple[str, str]:
        """Two revisions by the same application share this, whatever their token's scopes."""
        return self.kind, self.client_id

    def columns(self) -> dict[str, Any]:
        """The ``EntryRevision`` columns that store this writer."""
        return {
            "writer_kind": self.kind,
            "writer_application_id": self.application_id if self.kind == APPLICATION else None,
            "writer_client_id": self.client_id,
            "writer_name": self.name,
            "writer_scopes": self.scopes,
        }


UNKNOWN_WRITER = Writer(UNKNOWN)
IMPORT_WRITER = Writer(IMPORT)
