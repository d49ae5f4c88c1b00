"""The OAuth scopes this server grants, with the words people see for them.

Plain data with no Django imports, so settings (DOT's ``SCOPES``), the token
issuer and the MCP endpoint's checks all read the one definition.
"""

READ = "notes:read"
WRITE = "notes:write"

# What the consent and connected-applications pages say each scope allows.
SCOPES = {READ: "Read your notes", WRITE: "Write your notes"}
ALL_SCOPES = tuple(SCOPES)
