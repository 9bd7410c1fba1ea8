"""What the API server sends to the webhooks at all: the selectors and CEL matchConditions
of the shipped webhook configurations, evaluated here with the CEL reference runtime (as
kube-apiserver evaluates them) over requests a cluster makes."""

from __future__ import annotations

import copy

import pytest

from foresize.front.cli.manifests import operator, webhooks
from foresize.testing.selectors import label_matcher
from support.kube_objects import pod

cel = pytest.importorskip("cel_expr_python.cel")

NS = "foresize-system"


def _hooks() -> dict[str, dict]:
    return {h["name"]: h for doc in webhooks(NS) for h in doc["webhooks"]}


def _sent(hook: dict, request: dict) -> bool:
    """Whether kube-apiserver calls `hook` for `request` (an AdmissionRequest): every
    matchCondition true (the namespace and object selectors are checked separately)."""
    env = cel.NewEnv(
        variables={"object": cel.Type.DYN, "oldObject": cel.Type.DYN, "request": cel.Type.DYN}
    )
    data = {
        "object": request.get("object"),
        "oldObject": request.get("oldObject"),
        "request": request,
    }
    return all(
        env.compile(c["expression"]).eval(data=data).value() is True
        for c in hook.get("matchConditions") or ()
    )


def _selector_text(selector: dict) -> str:
    parts = [f"{k}={v}" for k, v in (selector.get("matchLabels") or {}).items()]
    for e in selector.get("matchExpressions") or ():
        op = {"In": "in", "NotIn": "notin"}[e["operator"]]
        parts.append(f"{e['key']} {op} ({','.join(e['values'])})")
    return ",".join(parts)


def _create(obj: dict) -> dict:
    return {"operation": "CREATE", "object": obj, "oldObject": None}


def test_pods_the_handler_would_not_change_are_not_sent():
    hook = _hooks()["pods.foresize.io"]
    plain = pod("web-3")
    assert _sent(hook, _create(plain))
    mirror = copy.deepcopy(plain)
    mirror["metadata"].setdefault("annotations", {})["kubernetes.io/config.mirror"] = "abc"
    assert not _sent(hook, _create(mirror))
    annotated = copy.deepcopy(plain)
    annotated["metadata"].setdefault("annotations", {})["team"] = "shop"
    assert _sent(hook, _create(annotated))
    pod_level = copy.deepcopy(plain)
    pod_level["spec"]["resources"] = {"requests": {"cpu": "1"}}
    assert not _sent(hook, _create(pod_level))


def test_the_operators_own_pods_and_namespaces_are_never_sent():
    hooks = _hooks()
    deployment = next(o for o in operator(NS, "foresize:test") if o["kind"] == "StatefulSet")
    own_labels = deployment["spec"]["template"]["metadata"]["labels"]
    selects = label_matcher(_selector_text(hooks["pods.foresize.io"]["objectSelector"]))
    assert not selects({"metadata": {"labels": own_labels}})
    assert selects(pod("web-3"))
    for hook in hooks.values():
        namespaces = label_matcher(_selector_text(hook["namespaceSelector"]))
        for name in ("kube-system", "kube-public", "kube-node-lease", NS):
            labelled = {"metadata": {"labels": {"kubernetes.io/metadata.name": name}}}
            assert not namespaces(labelled), (hook["name"], name)
        assert namespaces({"metadata": {"labels": {"kubernetes.io/metadata.name": "shop"}}})


def test_target_updates_that_leave_spec_alone_are_not_validated():
    hook = _hooks()["aiscaletargets.foresize.io"]
    obj = {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}},
    }
    assert _sent(hook, _create(obj))
    finalized = copy.deepcopy(obj)
    finalized["metadata"]["finalizers"] = ["foresize.io/revert"]
    assert not _sent(hook, {"operation": "UPDATE", "object": finalized, "oldObject": obj})
    changed = copy.deepcopy(obj)
    changed["spec"]["scaleTargetRef"]["name"] = "api"
    assert _sent(hook, {"operation": "UPDATE", "object": changed, "oldObject": obj})
