"""The audit log: one line for each event that changes who may use this server, written
with the access log's lines (contract 10: the access log is also the audit log).

``audit(event, **fields)`` writes one INFO record on the logger ``codex.access.audit``, a child
of the access log's ``codex.access``: its lines go wherever access lines go (the console, one
JSON object per line with ``CODEX_LOG_FORMAT=json``), and an operator can route or silence them
apart. A JSON line has the ``event`` and the fields as keys; a plain line says them in its
message (``audit token.revoked: user_id=4 client_id=... by=person``).

The events (docs/deploy.md, "The audit log", lists them with their fields):

- ``token.granted``: an access token issued (any grant at the token endpoint, or ``mint_token``);
- ``token.revoked``: tokens revoked (by the person, an operator, the client, a deactivation,
  deprovisioning, the account's deletion, an authorization code's second use);
- ``account.deleted``: a person's account deleted;
- ``person.provisioned``, ``person.updated``, ``person.deactivated``, ``person.reactivated``,
  ``person.deleted``: SCIM provisioning (``person.deactivated`` and ``person.deleted`` are the
  deprovisioning);
- ``scim.credential_issued``, ``scim.credential_revoked``: an organization's SCIM credential;
- ``scim.refused``: a SCIM request whose credential was missing or wrong;
- ``policy.refused``: a client or a grant refused by the operator's policy;
- ``agent.created``, ``agent.revoked``: a person's headless agent.

A person is named by ``user_id``, their account's key: it never changes, where a username can
(SCIM renames people), and it is not the person's e-mail address, which a log shipped
elsewhere should not spread. An application is named by its ``client_id``.

No field carries a token, a secret, a credential, an assertion or note content: ``audit``
refuses a field whose name says it would (``ValueError``, a mistake in the caller), and every
value must be an id, a name, a code or a count (a string of at most ``MAX_TEXT`` characters, a
number, a boolean, None, or a list of those). A string may be a stranger's (a metadata document's
client id is a URL anyone chooses): the formatters escape it (``codex_site.logs.one_line``), so
no value writes a line of its own.
"""

import logging
import re
from typing import Any

logger = logging.getLogger("codex.access.audit")

MAX_TEXT = 256

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
# Names that would carry what the log must never hold. An id of such a thing is fine
# (``access_token_id``): only the name's last word is judged.
_FORBIDDEN_WORDS = frozenset(
    {"token", "secret", "password", "credential", "assertion", "content", "title", "tags", "code", "cookie"}
)
# Fields the record itself has (``logging.LogRecord``'s attributes) cannot be extras.
_RESERVED = frozenset({"message", "name", "msg", "args", "level", "time", "logger", "event_"})


def _checked(name: str, value: Any) -> Any:
    if not _NAME.match(name) or name in _RESERVED or name.rsplit("_", 1)[-1] in _FORBIDDEN_WORDS:
        raise ValueError(f"audit field {name!r} is not allowed (ids, names, codes and counts only)")
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, str):
        return value[:MAX_TEXT]
    if isinstance(value, list | tuple | frozenset | set):
        items = sorted(value) if isinstance(value, frozenset | set) else list(value)
        return [_checked(name, item) for item in items]
    raise ValueError(f"audit field {name!r} must be an id, a name, a code or a count, not {type(value).__name__}")


def audit(event: str, **fields: Any) -> None:
    """Write one audit line for ``event`` with these fields (the module's docstring)."""
    if not _NAME.match(event.replace(".", "_")):
        raise ValueError(f"audit event {event!r} must be a dotted lowercase name")
    values = {name: _checked(name, value) for name, value in fields.items()}
    if not logger.isEnabledFor(logging.INFO):
        return
    said = " ".join(f"{name}={value}" for name, value in values.items())
    logger.info(f"audit {event}: {said}" if said else f"audit {event}", extra={"event": event, **values})
