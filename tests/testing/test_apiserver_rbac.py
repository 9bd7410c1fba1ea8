"""The strict API server authorizes as kube-apiserver's RBAC does (`foresize.testing.
apiserver.rbac`): upstream's own test tables (plugin/pkg/auth/authorizer/rbac/rbac_test.go,
TestRuleMatches and TestAuthorizer), the request attributes read from a path, and the
operator's requests over HTTP answered 403 with kube-apiserver's Status body when the
shipped roles do not grant them."""

from __future__ import annotations

import pytest

from foresize.shells.kube.api import MERGE_PATCH, KubeApi
from foresize.shells.kube.rbac import operator_rbac
from foresize.testing.apiserver import ADMIN_TOKEN, OPERATOR_NAMESPACE, Rbac, StrictApiServer
from foresize.testing.apiserver.rbac import (
    Attributes,
    User,
    request_attributes,
    rule_allows,
    service_account,
)
from support.kube_objects import namespace, pod


def res(verb: str, group: str, resource: str, sub: str = "", name: str = "") -> Attributes:
    return Attributes(verb, "", True, group, resource, sub, "", name)


def url(verb: str, path: str) -> Attributes:
    return Attributes(verb, path)


def rule(verbs: str, groups: str | None = None, resources: str = "", urls: str = "") -> dict:
    """A PolicyRule from comma-separated lists ("" is the core group)."""
    out: dict = {"verbs": verbs.split(",")}
    if groups is not None:
        out["apiGroups"] = groups.split(",")
    if resources:
        out["resources"] = resources.split(",")
    if urls:
        out["nonResourceURLs"] = urls.split(",")
    return out


V1, V2, G1, G2, R1, R2 = "verb1", "verb2", "group1", "group2", "resource1", "resource2"
EVERY_PAIR = [(v, g, r) for v in (V1, V2) for g in (G1, G2) for r in (R1, R2)]
# TestRuleMatches: name, rule, {request: expected}
RULE_MATCHES = [
    (
        "star verb, exact match other",
        rule("*", G1, R1),
        {res(v, g, r): (g, r) == (G1, R1) for v, g, r in EVERY_PAIR},
    ),
    (
        "star group, exact match other",
        rule(V1, "*", R1),
        {res(v, g, r): (v, r) == (V1, R1) for v, g, r in EVERY_PAIR},
    ),
    (
        "star resource, exact match other",
        rule(V1, G1, "*"),
        {res(v, g, r): (v, g) == (V1, G1) for v, g, r in EVERY_PAIR},
    ),
    (
        "tuple expansion",
        rule(f"{V1},{V2}", f"{G1},{G2}", f"{R1},{R2}"),
        {res(v, g, r): True for v, g, r in EVERY_PAIR},
    ),
    (
        "subresource expansion",
        rule("*", "*", "resource1/subresource1"),
        {
            res(V1, G1, R1, "subresource1"): True,
            res(V1, G2, R1, "subresource2"): False,
            res(V1, G1, R2, "subresource1"): False,
            res(V1, G2, R2, "subresource1"): False,
            res(V2, G1, R1, "subresource1"): True,
            res(V2, G2, R1, "subresource2"): False,
            res(V2, G1, R2, "subresource1"): False,
            res(V2, G2, R2, "subresource1"): False,
        },
    ),
    (
        "star nonresource, exact match other",
        rule(V1, urls="*"),
        {
            url(v, p): v == V1
            for v in (V1, V2)
            for p in ("/foo", "/foo/bar", "/foo/baz", "/foo/bar/one", "/foo/baz/one")
        },
    ),
    (
        "star nonresource subpath",
        rule(V1, urls="/foo/*"),
        {
            url(V1, "/foo"): False,
            url(V1, "/foo/bar"): True,
            url(V1, "/foo/baz"): True,
            url(V1, "/foo/bar/one"): True,
            url(V1, "/foo/baz/one"): True,
            url(V1, "/notfoo"): False,
            url(V1, "/notfoo/bar"): False,
            url(V1, "/notfoo/baz"): False,
            url(V1, "/notfoo/bar/one"): False,
            url(V1, "/notfoo/baz/one"): False,
        },
    ),
    (
        "star verb, exact nonresource",
        rule("*", urls="/foo,/foo/bar/one"),
        {
            url(v, p): p in ("/foo", "/foo/bar/one")
            for v in (V1, V2)
            for p in ("/foo", "/foo/bar", "/foo/baz", "/foo/bar/one", "/foo/baz/one")
        },
    ),
]


@pytest.mark.parametrize(
    ("rule_", "expected"), [c[1:] for c in RULE_MATCHES], ids=[c[0] for c in RULE_MATCHES]
)
def test_upstream_rule_matches(rule_, expected):
    got = {request: rule_allows(request, rule_) for request in expected}
    assert got == expected


def test_resource_names_limit_every_verb_but_a_nameless_create():
    """ResourceNameMatches: a rule with names matches only a request for one of them; a
    create has no name yet, so such a rule never allows it (why the Role grants create on
    secrets apart)."""
    named = {**rule("get,create,patch", "", "secrets"), "resourceNames": ["tls"]}
    assert rule_allows(res("get", "", "secrets", name="tls"), named)
    assert rule_allows(res("patch", "", "secrets", name="tls"), named)
    assert not rule_allows(res("patch", "", "secrets", name="other"), named)
    assert not rule_allows(res("create", "", "secrets"), named)
    star_sub = rule("patch", "", "*/resize")
    assert rule_allows(res("patch", "", "pods", "resize"), star_sub)
    assert not rule_allows(res("patch", "", "pods"), star_sub)


def _binding(kind: str, role_kind: str, role: str, subjects: list[str], ns: str = "") -> dict:
    out: dict = {
        "kind": kind,
        "metadata": {"name": f"{role}-binding", **({"namespace": ns} if ns else {})},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [],
    }
    for subject in subjects:
        s_kind, _, s_name = subject.partition(":")
        out["subjects"].append({"kind": s_kind, "name": s_name})
    return out


def _ns_res(user: str, groups: str, verb: str, resource: str, sub: str, ns: str):
    who = User(user, tuple(g for g in groups.split(",") if g))
    return who, Attributes(verb, "", True, "", resource, sub, ns)


# TestAuthorizer: roles and bindings, requests that pass and requests that fail.
ADMIN_ALL = {"kind": "ClusterRole", "metadata": {"name": "admin"}, "rules": [rule("*", "*", "*")]}
AUTHORIZER_CASES = [
    (
        "cluster role bound in one namespace",
        [
            ADMIN_ALL,
            _binding("RoleBinding", "ClusterRole", "admin", ["User:admin", "Group:admins"], "ns1"),
        ],
        [
            ("admin", "", "get", "Pods", "", "ns1"),
            ("admin", "", "watch", "Pods", "", "ns1"),
            ("admin", "group1", "watch", "Foobar", "", "ns1"),
            ("joe", "admins", "watch", "Foobar", "", "ns1"),
            ("joe", "group1,admins", "watch", "Foobar", "", "ns1"),
        ],
        [
            ("admin", "", "GET", "Pods", "", "ns2"),
            ("admin", "", "GET", "Nodes", "", ""),
            ("admin", "admins", "GET", "Pods", "", "ns2"),
            ("admin", "admins", "GET", "Nodes", "", ""),
        ],
    ),
    (
        "test subresource resolution: pods",
        [
            {
                "kind": "ClusterRole",
                "metadata": {"name": "admin"},
                "rules": [rule("*", "*", "pods")],
            },
            _binding("RoleBinding", "ClusterRole", "admin", ["User:admin", "Group:admins"], "ns1"),
        ],
        [("admin", "", "get", "pods", "", "ns1")],
        [("admin", "", "get", "pods", "status", "ns1")],
    ),
    (
        "test subresource resolution: pods/status",
        [
            {
                "kind": "ClusterRole",
                "metadata": {"name": "admin"},
                "rules": [rule("*", "*", "pods/status")],
            },
            _binding("RoleBinding", "ClusterRole", "admin", ["User:admin", "Group:admins"], "ns1"),
        ],
        [("admin", "", "get", "pods", "status", "ns1")],
        [("admin", "", "get", "pods", "", "ns1")],
    ),
]


@pytest.mark.parametrize(
    ("objects", "should_pass", "should_fail"),
    [c[1:] for c in AUTHORIZER_CASES],
    ids=[c[0] for c in AUTHORIZER_CASES],
)
def test_upstream_authorizer(objects, should_pass, should_fail):
    rbac = Rbac(objects)
    assert [r for r in should_pass if not rbac.allows(*_ns_res(*r))] == []
    assert [r for r in should_fail if rbac.allows(*_ns_res(*r))] == []


def test_upstream_authorizer_non_resource_urls():
    """TestAuthorizer's non-resource-url case."""

    def role(name: str, verbs: str, urls: str) -> dict:
        return {
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": [rule(verbs, urls=urls)],
        }

    rbac = Rbac(
        [
            role("getter", "get", "/apis"),
            role("any", "*", "/apis"),
            role("prefix", "get", "/apis/*"),
            _binding("ClusterRoleBinding", "ClusterRole", "getter", ["User:foo", "Group:bar"]),
            _binding("ClusterRoleBinding", "ClusterRole", "any", ["User:admin", "Group:admin"]),
            _binding(
                "ClusterRoleBinding", "ClusterRole", "prefix", ["User:prefixed", "Group:prefixed"]
            ),
        ]
    )

    def ok(name: str, group: str, verb: str, path: str) -> bool:
        return rbac.allows(User(name, (group,) if group else ()), url(verb, path))

    passing = [
        ("foo", "", "get", "/apis"),
        ("", "bar", "get", "/apis"),
        ("admin", "", "get", "/apis"),
        ("", "admin", "get", "/apis"),
        ("admin", "", "watch", "/apis"),
        ("", "admin", "watch", "/apis"),
        ("prefixed", "", "get", "/apis/v1"),
        ("", "prefixed", "get", "/apis/v1"),
        ("prefixed", "", "get", "/apis/v1/foobar"),
        ("", "prefixed", "get", "/apis/v1/foorbar"),
    ]
    failing = [
        ("foo", "", "watch", "/apis"),  # wrong verb
        ("", "bar", "watch", "/apis"),
        ("foo", "", "get", "/api/v1"),  # wrong path
        ("", "bar", "get", "/api/v1"),
        ("admin", "", "get", "/api/v1"),
        ("", "admin", "get", "/api/v1"),
        ("prefixed", "", "get", "/api/v1"),  # not covered by the prefix
        ("", "prefixed", "get", "/api/v1"),
    ]
    assert [c for c in passing if not ok(*c)] == []
    assert [c for c in failing if ok(*c)] == []


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/namespaces/shop/pods", {}, ("list", "", "pods", "", "shop", "")),
        (
            "GET",
            "/api/v1/pods",
            {"watch": "true", "fieldSelector": "metadata.name=web-1"},
            ("watch", "", "pods", "", "", "web-1"),
        ),
        (
            "PATCH",
            "/api/v1/namespaces/shop/pods/web-1/resize",
            {},
            ("patch", "", "pods", "resize", "shop", "web-1"),
        ),
        (
            "POST",
            "/api/v1/namespaces/shop/pods/web-1/eviction",
            {},
            ("create", "", "pods", "eviction", "shop", "web-1"),
        ),
        ("GET", "/api/v1/namespaces/shop", {}, ("get", "", "namespaces", "", "shop", "shop")),
        (
            "PUT",
            "/api/v1/namespaces/shop/finalize",
            {},
            ("update", "", "namespaces", "finalize", "shop", "shop"),
        ),
        (
            "DELETE",
            "/apis/foresize.io/v1/namespaces/shop/aiscaletargets",
            {},
            ("deletecollection", "foresize.io", "aiscaletargets", "", "shop", ""),
        ),
        (
            "GET",
            "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/foresize",
            {},
            (
                "get",
                "admissionregistration.k8s.io",
                "mutatingwebhookconfigurations",
                "",
                "",
                "foresize",
            ),
        ),
    ],
)
def test_request_attributes_from_the_path_as_requestinfo(method, path, query, expected):
    a = request_attributes(method, path, query)
    assert a.resource_request
    assert (a.verb, a.group, a.resource, a.subresource, a.namespace, a.name) == expected


@pytest.mark.parametrize(
    "path", ["/api", "/api/v1", "/apis/foresize.io/v1", "/version", "/healthz"]
)
def test_discovery_paths_are_not_resource_requests_and_any_authenticated_user_reads_them(path):
    a = request_attributes("GET", path, {})
    assert not a.resource_request and a.verb == "get"
    assert Rbac([]).allows(service_account("x", "y"), a)
    assert not Rbac([]).allows(service_account("x", "y"), request_attributes("POST", path, {}))


async def test_the_operator_is_refused_what_the_shipped_roles_do_not_grant():
    """Over HTTP, as the operator meets it: 403 Forbidden with kube-apiserver's message
    and details for a verb or resource the shipped roles do not grant; the same call
    with the cluster admin's token, or under roles that grant it, goes through."""
    async with StrictApiServer() as server:
        server.seed(namespace("shop"))
        server.seed(pod("web-1", owner=None))
        operator = KubeApi.from_url(server.url)
        admin = KubeApi.from_url(server.url, token=ADMIN_TOKEN)
        try:
            deleted = await operator.request("DELETE", "/api/v1/namespaces/shop/pods/web-1")
            assert deleted.code == 403
            assert deleted.body == {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": 'pods "web-1" is forbidden: User "system:serviceaccount:'
                f'{OPERATOR_NAMESPACE}:foresize" cannot delete resource "pods" in API group '
                '"" in the namespace "shop"',
                "reason": "Forbidden",
                "details": {"name": "web-1", "kind": "pods"},
                "code": 403,
            }
            # Granted cluster-wide: patch on pods (the annotation), get on pods.
            ok = await operator.request(
                "PATCH", "/api/v1/namespaces/shop/pods/web-1", {"metadata": {}}, MERGE_PATCH
            )
            assert ok.code == 200
            # The Role is bound in the operator's namespace only.
            lease = "/apis/coordination.k8s.io/v1/namespaces/shop/leases/x"
            assert (await operator.request("GET", lease)).code == 403
            own = f"/apis/coordination.k8s.io/v1/namespaces/{OPERATOR_NAMESPACE}/leases/x"
            assert (await operator.request("GET", own)).code == 404  # allowed, not there
            secret = f"/api/v1/namespaces/{OPERATOR_NAMESPACE}/secrets/someone-elses"
            refused = await operator.request("GET", secret)
            assert refused.code == 403 and refused.body["details"] == {
                "name": "someone-elses",
                "kind": "secrets",
            }
            # Namespaces are listed and watched (their policy label), never read one by one.
            assert (await operator.request("GET", "/api/v1/namespaces/shop")).code == 403
            assert (await admin.request("DELETE", "/api/v1/namespaces/shop/pods/web-1")).code == 200
            assert [r.user for r in server.calls(code=403)] == [
                f"system:serviceaccount:{OPERATOR_NAMESPACE}:foresize"
            ] * 4
        finally:
            await operator.close()
            await admin.close()


async def test_other_roles_or_none_are_explicit():
    """A server can enforce other roles (a test that needs more rights names them) or
    none (rbac=None)."""
    extra = [
        *operator_rbac("fs"),
        {
            "kind": "ClusterRole",
            "metadata": {"name": "pod-creator"},
            "rules": [rule("create", "", "pods")],
        },
        _binding("ClusterRoleBinding", "ClusterRole", "pod-creator", ["ServiceAccount:foresize"])
        | {"subjects": [{"kind": "ServiceAccount", "name": "foresize", "namespace": "fs"}]},
    ]
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "shop"},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }
    for rbac, code in ((Rbac(extra), 201), (None, 201), ("shipped", 403)):
        async with StrictApiServer(rbac=rbac, operator_namespace="fs") as server:
            server.seed(namespace("shop"))
            api = KubeApi.from_url(server.url)
            try:
                assert (
                    await api.request("POST", "/api/v1/namespaces/shop/pods", body)
                ).code == code
            finally:
                await api.close()
