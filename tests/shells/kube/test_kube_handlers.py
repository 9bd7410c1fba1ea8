"""Kopf's login when the kubeconfig user authenticates through an exec plugin (EKS, GKE,
OIDC): the registry is built with Kopf's own login handlers instead of ours."""

from __future__ import annotations

import kopf
from lightkube import KubeConfig

from foresize.shells.kube.handlers import build_registry, connection_from_lightkube


def test_an_exec_plugin_user_gets_kopfs_own_logins():
    config = KubeConfig.from_dict(
        {
            "clusters": [{"name": "c", "cluster": {"server": "https://10.0.0.1"}}],
            "users": [
                {
                    "name": "u",
                    "user": {
                        "exec": {
                            "apiVersion": "client.authentication.k8s.io/v1",
                            "command": "aws",
                            "args": ["eks", "get-token"],
                        }
                    },
                }
            ],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
    ).get()
    assert connection_from_lightkube(config) is None
    registry = build_registry(lightkube_config=config)
    logins = [h for h in registry._activities.get_all_handlers() if h.activity == "authentication"]
    assert {h.fn for h in logins} == {kopf.login_with_service_account, kopf.login_with_kubeconfig}


def _validate_handler():
    registry = build_registry(server="http://127.0.0.1:1")
    handlers = [h for h in registry._changing.get_all_handlers() if h.id == "validate"]
    return handlers[0].fn


def _target(conditions: list[dict]) -> dict:
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}},
        "status": {"conditions": conditions},
    }


def test_the_accepted_condition_is_written_only_when_it_changes():
    """`on.resume` runs for every object at each start: 10k targets must not be 10k
    status writes of the condition they already carry."""
    from foresize.shells.kube.handlers import accepted_condition

    validate = _validate_handler()
    other = {"type": "InPlaceResizeUnsupported", "status": "False"}
    same = kopf.Patch()
    validate(body=_target([other, accepted_condition(None)]), patch=same)
    assert dict(same) == {}
    changed = kopf.Patch()
    stale = {**accepted_condition(None), "status": "False", "reason": "InvalidSpec"}
    validate(body=_target([other, stale]), patch=changed)
    assert changed["status"]["conditions"] == [other, accepted_condition(None)]
