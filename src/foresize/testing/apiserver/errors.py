"""Errors of the strict API server, shaped like kube-apiserver's Status bodies (`reason`,
`message`, `details.causes`, `retryAfterSeconds`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from foresize.testing.validation import FieldError

if TYPE_CHECKING:
    from foresize.testing.apiserver.resources import ResourceType


class ApiError(Exception):
    """An answer with a Kubernetes Status body."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            out["details"] = self.details
        return out


def status_details(rtype: ResourceType | None, name: str, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if rtype is not None:
        if rtype.group:
            out["group"] = rtype.group
        out["kind"] = rtype.plural
    out.update(extra)
    return out


def not_found(rtype: ResourceType, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{rtype.group_resource} "{name}" not found',
        details=status_details(rtype, name),
    )


def conflict(rtype: ResourceType, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {rtype.group_resource} "{name}": {why}',
        details=status_details(rtype, name),
    )


STALE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def invalid(rtype: ResourceType, name: str, errors: list[FieldError]) -> ApiError:
    texts = [e.text() for e in errors]
    listed = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    kind = f"{rtype.kind}.{rtype.group}" if rtype.group else rtype.kind
    details = status_details(rtype, name)
    details["kind"] = rtype.kind
    details["causes"] = [
        {"reason": e.reason, "message": e.message, "field": e.field} for e in errors
    ]
    return ApiError(422, "Invalid", f'{kind} "{name}" is invalid: {listed}', details=details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)
