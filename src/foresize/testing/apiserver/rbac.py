"""RBAC authorization as kube-apiserver does it, for the strict API server.

Following upstream:
- request attributes from the path and method (`k8s.io/apiserver/pkg/endpoints/request/
  requestinfo.go`): verb (get/list/watch/create/update/patch/delete/deletecollection; for a
  path outside /api and /apis the lowercase HTTP method), API group, resource, subresource,
  namespace, name (for list and watch the name of a `metadata.name=` field selector);
- the rules that apply (`pkg/registry/rbac/validation/rule.go`, VisitRulesFor): those of
  every ClusterRoleBinding naming the user, then those of the RoleBindings in the
  request's namespace (a RoleBinding may refer to a ClusterRole; its rules then apply in
  that namespace only);
- one rule's match (`plugin/pkg/auth/authorizer/rbac/rbac.go` RuleAllows and
  `pkg/apis/rbac/v1/evaluation_helpers.go`): `*` or equal verb and group, `*`, the exact
  `resource/subresource` or `*/subresource`, resourceNames (empty: any name; a create has
  no name, so a rule with names never allows it), nonResourceURLs exact or `prefix*`;
- subjects (`appliesToUser`): User by name, Group by membership, ServiceAccount by
  `system:serviceaccount:NS:NAME` (a subject without namespace takes the binding's);
- the group `system:masters` is allowed everything before RBAC is asked (the privileged
  group authorizer), and every authenticated user may read discovery (the bootstrap
  ClusterRole `system:discovery`);
- a refusal is 403 Forbidden with kube-apiserver's message (`responsewriters.Forbidden`,
  `apierrors.NewForbidden`): `pods "web-1" is forbidden: User "..." cannot patch resource
  "pods/resize" in API group "" in the namespace "shop"`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from foresize.testing.apiserver.errors import ApiError

MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
# kube-apiserver's bootstrap policy: discovery for every authenticated user.
DISCOVERY_URLS = (
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/openapi",
    "/openapi/*",
    "/readyz",
    "/version",
    "/version/",
)
BOOTSTRAP = (
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "system:discovery"},
        "rules": [{"nonResourceURLs": list(DISCOVERY_URLS), "verbs": ["get"]}],
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "system:discovery"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "system:discovery",
        },
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": AUTHENTICATED}
        ],
    },
)
VERBS = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}


@dataclass(frozen=True, slots=True)
class User:
    name: str
    groups: tuple[str, ...] = (AUTHENTICATED,)


ADMIN = User("kubernetes-admin", (MASTERS, AUTHENTICATED))


def service_account(namespace: str, name: str) -> User:
    """The user a ServiceAccount's token authenticates as."""
    return User(
        f"system:serviceaccount:{namespace}:{name}",
        ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED),
    )


@dataclass(frozen=True, slots=True)
class Attributes:
    """What RBAC checks about one request (upstream's RequestInfo)."""

    verb: str
    path: str = ""
    resource_request: bool = False
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""


def request_attributes(method: str, path: str, query: Mapping[str, str]) -> Attributes:
    """The request's attributes, from its method, path and query alone (as requestinfo.go:
    before the server knows whether the resource exists)."""
    parts = [p for p in path.strip("/").split("/") if p]
    plain = Attributes(verb=method.lower(), path=path)
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return plain
    prefix, parts = parts[0], parts[1:]
    group = ""
    if prefix == "apis":
        if len(parts) < 3:
            return plain
        group, parts = parts[0], parts[1:]
    parts = parts[1:]  # the version
    verb = VERBS.get(method.upper(), "")
    namespace = ""
    if parts[0] == "namespaces" and len(parts) > 1:
        namespace = parts[1]
        if len(parts) > 2 and parts[2] not in ("status", "finalize"):
            parts = parts[2:]
    resource = parts[0]
    name = parts[1] if len(parts) > 1 else ""
    subresource = parts[2] if len(parts) > 2 else ""
    if not name and verb == "get":
        verb = "watch" if str(query.get("watch", "")).lower() in ("1", "t", "true") else "list"
        name = _exact_name(query.get("fieldSelector", ""))
    elif not name and verb == "delete":
        verb = "deletecollection"
    return Attributes(verb, path, True, group, resource, subresource, namespace, name)


def _exact_name(selector: str) -> str:
    """The name a field selector requires exactly (`metadata.name=x` or `==x`), else ""."""
    for term in selector.split(","):
        key, sep, value = term.partition("=")
        if sep and not key.endswith("!") and key.strip() == "metadata.name":
            return value.removeprefix("=").strip()
    return ""


def rule_allows(attrs: Attributes, rule: Mapping[str, Any]) -> bool:
    """Upstream's RuleAllows."""
    verbs = rule.get("verbs") or []
    if "*" not in verbs and attrs.verb not in verbs:
        return False
    if not attrs.resource_request:
        return any(
            url == "*"
            or url == attrs.path
            or (url.endswith("*") and attrs.path.startswith(url.rstrip("*")))
            for url in rule.get("nonResourceURLs") or []
        )
    groups = rule.get("apiGroups") or []
    if "*" not in groups and attrs.group not in groups:
        return False
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    if not any(
        r == "*" or r == combined or (attrs.subresource and r == f"*/{attrs.subresource}")
        for r in rule.get("resources") or []
    ):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def _applies_to(user: User, subject: Mapping[str, Any], namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return user.name == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        sa_namespace = subject.get("namespace") or namespace
        return bool(sa_namespace) and user.name == f"system:serviceaccount:{sa_namespace}:{name}"
    return False


class Rbac:
    """An authorizer over Roles, ClusterRoles, RoleBindings and ClusterRoleBindings (the
    bootstrap discovery role is always there)."""

    def __init__(self, objects: Iterable[Mapping[str, Any]]) -> None:
        self.roles: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        self.cluster_roles: dict[str, list[Mapping[str, Any]]] = {}
        self.bindings: list[Mapping[str, Any]] = []
        self.cluster_bindings: list[Mapping[str, Any]] = []
        for obj in (*BOOTSTRAP, *objects):
            self.add(obj)

    def add(self, obj: Mapping[str, Any]) -> None:
        """Add one RBAC object (other kinds are ignored, so a whole install can be given)."""
        meta = obj.get("metadata") or {}
        kind = obj.get("kind")
        if kind == "ClusterRole":
            self.cluster_roles[meta["name"]] = list(obj.get("rules") or [])
        elif kind == "Role":
            self.roles[(meta["namespace"], meta["name"])] = list(obj.get("rules") or [])
        elif kind == "ClusterRoleBinding":
            self.cluster_bindings.append(obj)
        elif kind == "RoleBinding":
            self.bindings.append(obj)

    def rules_for(self, user: User, namespace: str) -> list[Mapping[str, Any]]:
        rules: list[Mapping[str, Any]] = []
        for binding in self.cluster_bindings:
            if any(_applies_to(user, s, "") for s in binding.get("subjects") or []):
                rules += self.cluster_roles.get(binding["roleRef"]["name"], [])
        if not namespace:
            return rules
        for binding in self.bindings:
            bound_in = binding["metadata"]["namespace"]
            if bound_in != namespace:
                continue
            if not any(_applies_to(user, s, bound_in) for s in binding.get("subjects") or []):
                continue
            ref = binding["roleRef"]
            if ref["kind"] == "ClusterRole":
                rules += self.cluster_roles.get(ref["name"], [])
            else:
                rules += self.roles.get((bound_in, ref["name"]), [])
        return rules

    def allows(self, user: User, attrs: Attributes) -> bool:
        if MASTERS in user.groups:
            return True
        return any(rule_allows(attrs, r) for r in self.rules_for(user, attrs.namespace))

    def check(self, user: User, attrs: Attributes) -> None:
        """Raise kube-apiserver's 403 when `user` may not make the request."""
        if not self.allows(user, attrs):
            raise forbidden(user, attrs)


def forbidden(user: User, attrs: Attributes) -> ApiError:
    if not attrs.resource_request:
        why = f'User "{user.name}" cannot {attrs.verb} path "{attrs.path}"'
        return ApiError(403, "Forbidden", f"forbidden: {why}", details={})
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    why = (
        f'User "{user.name}" cannot {attrs.verb} resource "{resource}" in API group '
        f'"{attrs.group}" {where}'
    )
    qualified = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
    subject = f'{qualified} "{attrs.name}"' if attrs.name else qualified
    details: dict[str, Any] = {"kind": attrs.resource}
    if attrs.name:
        details["name"] = attrs.name
    if attrs.group:
        details["group"] = attrs.group
    return ApiError(403, "Forbidden", f"{subject} is forbidden: {why}", details=details)
