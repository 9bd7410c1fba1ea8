"""A thin, explicit HTTP layer over lightkube's async client.

lightkube supplies the connection: kubeconfig or in-cluster service account, TLS, bearer
token refresh, the httpx transport. Foresize sends its own JSON bodies on exact paths and
reads the raw answer (status code, Kubernetes `Status` body, `Retry-After`), because the
planners need the API server's reason and causes verbatim (429 with `DisruptionBudget`,
403 `NodeCapacity`, 422 validation) rather than a decoded model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from foresize.errors import ForesizeError

JSON = "application/json"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"


@dataclass(slots=True)
class ApiResponse:
    code: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return 200 <= self.code < 300


class KubeApi:
    """Send requests through a `lightkube.AsyncClient`'s configured transport."""

    def __init__(self, client: Any) -> None:
        self.client = client  # lightkube.AsyncClient

    @classmethod
    def from_url(cls, url: str, namespace: str = "default") -> KubeApi:
        """A client for an API server at `url` without auth (tests, `kubectl proxy`)."""
        from urllib.parse import urlparse

        from lightkube import AsyncClient, KubeConfig
        from lightkube.config.models import Cluster, User

        parts = urlparse(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ForesizeError(f"--server: {url!r} is not an http:// or https:// URL")
        config = KubeConfig.from_one(cluster=Cluster(server=url), user=User(), namespace=namespace)
        return cls(AsyncClient(config, trust_env=False))

    @classmethod
    def from_environment(cls, kubeconfig: str | None = None, context: str | None = None) -> KubeApi:
        """In-cluster service account when running in a pod, else the kubeconfig."""
        from lightkube import AsyncClient, KubeConfig

        if kubeconfig:
            try:
                config = KubeConfig.from_file(kubeconfig).get(context_name=context)
            except (AttributeError, TypeError, KeyError, ValueError) as exc:
                # A YAML file that is not a kubeconfig (a list, a string, missing keys).
                raise ForesizeError(
                    f"--kubeconfig: {kubeconfig}: not a kubeconfig ({type(exc).__name__}: {exc})"
                ) from None
        else:
            config = KubeConfig.from_env().get(context_name=context)
        return cls(AsyncClient(config))

    @property
    def _generic(self) -> Any:
        return self.client._client  # lightkube GenericAsyncClient

    @property
    def base_url(self) -> str:
        return str(self._generic.config.cluster.server)

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = JSON,
        params: dict[str, str] | None = None,
    ) -> ApiResponse:
        http = self._generic._client  # the configured httpx client (auth, TLS, base URL)
        content = None if body is None else json.dumps(body).encode()
        headers = {"Accept": JSON}
        if content is not None:
            headers["Content-Type"] = content_type
        req = http.build_request(
            method, path, params=params or None, content=content, headers=headers
        )
        resp = await self._generic.send(req)
        try:
            data = resp.json() if resp.content else None
        except ValueError:
            data = {"message": resp.text}
        return ApiResponse(code=resp.status_code, body=data, headers=dict(resp.headers))

    async def server_version(self) -> dict[str, Any]:
        resp = await self.request("GET", "/version")
        if not resp.ok or not isinstance(resp.body, dict):
            raise RuntimeError(f"GET /version answered {resp.code}: {resp.body}")
        return resp.body

    async def close(self) -> None:
        await self.client.close()
