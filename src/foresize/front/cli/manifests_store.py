"""The operator's shared history store in the install manifests (`foresize manifests
--history-store ...`): its URLs, tenant and credentials Secret, as the chart's
`history.store` gives them (the chart's rendering and this one are compared by
`tests/front/cli/test_manifests.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from foresize.core.api.names import dns_subdomain_error

HISTORY_STORE_AUTH = "/etc/foresize/history-store"
"""Where the shared store's credentials Secret is mounted (read-only): the operator reads
the token or password file again for every request, so a rotated Secret is used without a
restart, and the credential is never in the pod spec."""


@dataclass(frozen=True, slots=True)
class HistoryStore:
    """A shared Prometheus-compatible history store, as the chart's `history.store` gives
    it: its query URL, remote-write URL (None: the operator's default), tenant
    (`X-Scope-OrgID`), and the Secret holding a bearer token (key `token`) or basic auth
    (keys `username` and `password`)."""

    url: str
    write_url: str | None = None
    tenant: str = ""
    token_secret: str = ""
    basic_auth_secret: str = ""

    def env(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{"name": "FORESIZE_HISTORY_STORE", "value": self.url}]
        if self.write_url:
            out.append({"name": "FORESIZE_HISTORY_STORE_WRITE", "value": self.write_url})
        if self.tenant:
            out.append({"name": "FORESIZE_HISTORY_STORE_TENANT", "value": self.tenant})
        if self.token_secret:
            out.append(
                {
                    "name": "FORESIZE_HISTORY_STORE_TOKEN_FILE",
                    "value": f"{HISTORY_STORE_AUTH}/token",
                }
            )
        elif self.basic_auth_secret:
            out += [
                {
                    "name": "FORESIZE_HISTORY_STORE_USERNAME",
                    "valueFrom": {
                        "secretKeyRef": {"name": self.basic_auth_secret, "key": "username"}
                    },
                },
                {
                    "name": "FORESIZE_HISTORY_STORE_PASSWORD_FILE",
                    "value": f"{HISTORY_STORE_AUTH}/password",
                },
            ]
        return out

    @property
    def auth_secret(self) -> str:
        return self.token_secret or self.basic_auth_secret


# No Foresize image is published: the install names the one its user built and pushed.


def history_store_of(
    url: str, write_url: str, tenant: str, token_secret: str, basic_auth_secret: str
) -> HistoryStore | None:
    """The shared store from the options, refused with the option named."""
    from foresize.core.errors import ForesizeError

    given = {
        "--history-store-write": write_url,
        "--history-store-tenant": tenant,
        "--history-store-token-secret": token_secret,
        "--history-store-basic-auth-secret": basic_auth_secret,
    }
    if not url:
        for flag, value in given.items():
            if value:
                raise ForesizeError(f"{flag} needs --history-store")
        return None
    if token_secret and basic_auth_secret:
        raise ForesizeError(
            "--history-store-token-secret and --history-store-basic-auth-secret: give one "
            "(a bearer token or basic auth), not both"
        )
    for flag, name in (
        ("--history-store-token-secret", token_secret),
        ("--history-store-basic-auth-secret", basic_auth_secret),
    ):
        if name and dns_subdomain_error(name):
            raise ForesizeError(
                f"{flag}: {name!r} is not a valid Secret name: {dns_subdomain_error(name)}"
            )
    # The tenant goes into an HTTP header on every request: no line breaks, no controls.
    if tenant and not tenant.isprintable():
        raise ForesizeError(
            f"--history-store-tenant: {tenant!r} has characters a header cannot carry"
        )
    return HistoryStore(url, write_url or None, tenant, token_secret, basic_auth_secret)
