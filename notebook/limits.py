"""Every limit of the product contract, in one place.

Models, validation, selectors, the JSON Schemas, the tool descriptions and the
HTTP guard all read these constants; descriptions are built from them, so a
changed limit cannot leave a stale sentence behind. ``thousands`` formats a
number the way the contract writes it ("65,536").
"""

# Contract section 3: the entry input.
CONTENT_MAX_BYTES = 65_536
TITLE_MAX_CHARS = 200
TAGS_MAX_ITEMS = 32
TAG_MAX_CHARS = 64
RELATED_AGENTS_MAX_ITEMS = 32
RELATED_AGENT_MAX_CHARS = 512
PROVENANCE_MAX_DEPTH = 8
PROVENANCE_MAX_BYTES = 8_192

# Contract section 5: tool arguments.
REQUEST_ID_MAX_CHARS = 128
ENTRY_ID_REGEX = "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"
MAX_SAFE_INTEGER = 9_007_199_254_740_991
QUERY_MAX_CHARS = 256
CURSOR_MAX_CHARS = 2_048
SEARCH_LIMIT_MAX = 50
SEARCH_LIMIT_DEFAULT = 20

# Contract sections 4 and 5: search results.
EXCERPT_CHARS = 160
CANDIDATES_PER_PAGE = 100

# Contract sections 6 and 7: protocol and transport.
MAX_ARGUMENT_MEMBERS = 2_000
MAX_BODY_BYTES = 1024 * 1024

# Import (contract 9): times the services could have written lie from this moment to the
# import's own time plus this much clock difference between the exporting server and this one.
IMPORT_EARLIEST_TIME = "1970-01-01T00:00:00+00:00"
IMPORT_CLOCK_SKEW_SECONDS = 24 * 3600
# A refused entry's id and reason are shown cut to this many characters.
IMPORT_REPORT_TEXT_CHARS = 300

# The largest primary key of a BigAutoField (PostgreSQL bigint, SQLite integer): an id in
# a query string above it can name no row.
MAX_BIGINT = 2**63 - 1

# An import upload's multipart envelope (boundaries, part headers, the CSRF field) on top
# of the file itself: a request longer than the file limit plus this is refused unread.
IMPORT_FORM_OVERHEAD_BYTES = 64 * 1024

# Who wrote a revision (not a contract limit): an OAuth application's client id and name
# are at most 255 characters in django-oauth-toolkit; the stored copies and an export
# file's writer fields share that bound.
WRITER_FIELD_MAX_CHARS = 255


def thousands(number: int) -> str:
    """A limit as the contract writes it: 65536 -> "65,536"."""
    return f"{number:,}"
