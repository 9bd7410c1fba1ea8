"""How the operator proves who it is to a shared history store (Mimir, Thanos, a
VictoriaMetrics or Prometheus behind an authenticating proxy): a tenant (`X-Scope-OrgID`,
Mimir's and Cortex's tenant header, which Thanos Receive takes with
`--receive.tenant-header=X-Scope-OrgID`), and a bearer token or a basic-auth password.

Secrets come from files (a mounted Secret), never from the command line, where `ps` and
the pod spec would show them. The files are read again for every read and every write of
the store, so a rotated token (a projected service-account token, a Vault agent's file)
is used from the next request without a restart; a trailing newline, as `kubectl create
secret --from-file` keeps it, is not part of the secret.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from foresize.core.errors import ForesizeError

TENANT_HEADER = "X-Scope-OrgID"


def _secret(path: str, option: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            value = f.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ForesizeError(f"{option}: cannot read {path}: {reason}") from None
    if not value:
        raise ForesizeError(f"{option}: {path} is empty")
    return value


@dataclass(frozen=True, slots=True)
class StoreAuth:
    """A tenant, and a bearer token file or a username with a password file."""

    tenant: str | None = None
    token_file: str | None = None
    username: str | None = None
    password_file: str | None = None
    option_prefix: str = "--history-store"  # how errors name the options

    def __post_init__(self) -> None:
        p = self.option_prefix
        if (self.username is None) != (self.password_file is None):
            raise ForesizeError(f"{p}-username and {p}-password-file go together")
        if self.token_file is not None and self.username is not None:
            raise ForesizeError(f"{p}-token-file: give it or {p}-username, not both")
        if self.tenant is not None and not self.tenant.strip():
            raise ForesizeError(f"{p}-tenant: empty")
        if self.tenant is not None and any(c in self.tenant for c in "\r\n"):
            raise ForesizeError(f"{p}-tenant: {self.tenant!r} is not a header value")

    def headers(self) -> dict[str, str]:
        """The headers every request to the store carries, the secrets read now."""
        out = {}
        if self.tenant:
            out[TENANT_HEADER] = self.tenant
        if self.token_file is not None:
            token = _secret(self.token_file, f"{self.option_prefix}-token-file")
            out["Authorization"] = f"Bearer {token}"
        if self.username is not None and self.password_file is not None:
            password = _secret(self.password_file, f"{self.option_prefix}-password-file")
            pair = f"{self.username}:{password}".encode()
            out["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        return out
