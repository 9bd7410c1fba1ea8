"""The strict API server's non-resource paths: `/version`, health, and API discovery
(`/api`, `/apis`, each group version's resource list)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from foresize.testing.apiserver.errors import ApiError
from foresize.testing.apiserver.resources import ResourceType


def discovery(
    method: str, path: str, types: Mapping[str, ResourceType], kube_version: tuple[int, int]
) -> Any:
    if method != "GET":
        raise ApiError(405, "MethodNotAllowed", f"the server does not allow this method on {path}")
    major, minor = kube_version
    if path == "/version":
        return {
            "major": str(major),
            "minor": str(minor),
            "gitVersion": f"v{major}.{minor}.0",
            "platform": "linux/amd64",
        }
    if path in ("/healthz", "/livez", "/readyz"):
        return "ok"
    if path == "/api":
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
    if path == "/apis":
        groups: dict[str, list[str]] = {}
        for t in types.values():
            if t.group and t.version not in groups.setdefault(t.group, []):
                groups[t.group].append(t.version)
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": g,
                    "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                    "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]},
                }
                for g, vs in sorted(groups.items())
            ],
        }
    m = re.fullmatch(r"/api/(v1)|/apis/([^/]+)/([^/]+)", path)
    if m:
        group, version = ("", "v1") if m.group(1) else (m.group(2), m.group(3))
        served = [t for t in types.values() if (t.group, t.version) == (group, version)]
        if served:
            resources = []
            for t in served:
                resources.append(
                    {
                        "name": t.plural,
                        "singularName": t.kind.lower(),
                        "namespaced": t.namespaced,
                        "kind": t.kind,
                        "verbs": list(t.verbs),
                    }
                )
                for sub in t.subresources:
                    resources.append(
                        {
                            "name": f"{t.plural}/{sub}",
                            "singularName": "",
                            "namespaced": t.namespaced,
                            "kind": {"scale": "Scale", "eviction": "Eviction"}.get(sub, t.kind),
                            "verbs": ["create"]
                            if sub == "eviction"
                            else ["get", "patch", "update"],
                        }
                    )
            return {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version,
                "resources": resources,
            }
    raise ApiError(404, "NotFound", "the server could not find the requested resource")
