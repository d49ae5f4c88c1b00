"""Notebook failures. Each carries the contract's error code as a class attribute;
``mcp_endpoint`` turns them into tool results in exactly one place."""


class NotebookError(Exception):
    code = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(NotebookError):
    code = "invalid_argument"


class NotFound(NotebookError):
    code = "not_found"


class Conflict(NotebookError):
    code = "conflict"


class Unauthenticated(NotebookError):
    code = "unauthenticated"


class PermissionDenied(NotebookError):
    code = "permission_denied"


class ResourceExhausted(NotebookError):
    code = "resource_exhausted"


class Unavailable(NotebookError):
    code = "unavailable"


class Internal(NotebookError):
    code = "internal"
