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
