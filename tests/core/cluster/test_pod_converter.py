"""One pod JSON converter: the pod webhook and the kube shell's watches read a pod with the
same `cluster.kubejson.pod_from`; the webhook's reading is strict about quantities."""

from __future__ import annotations

import copy

from foresize.core.admission.index import AdmissionIndex
from foresize.core.admission.review import pod_from_json, review_pod
from foresize.core.api.quantity import GIB, MIB
from foresize.core.cluster.kubejson import pod_from
from support.admission import pod_json, review


def _pod() -> dict:
    obj = pod_json()
    obj["metadata"]["name"] = "web-5d9f8-abcde"
    obj["spec"]["initContainers"] = [
        {
            "name": "proxy",
            "restartPolicy": "Always",
            "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}],
            "resources": {"requests": {"cpu": "50m", "nvidia.com/gpu": "1"}},
        }
    ]
    obj["spec"]["overhead"] = {"cpu": "250m"}
    return obj


def test_the_webhook_reads_a_pod_exactly_as_the_watches_do() -> None:
    obj = _pod()
    webhook, watched = pod_from_json(obj, "shop"), pod_from(obj)
    assert webhook == watched
    app, proxy = webhook.containers[0], webhook.init_containers[0]
    # Every resource is read (not only cpu and memory), the sidecar's policies too.
    assert app.resources.requests == {"cpu": 100, "memory": 128 * MIB, "ephemeral-storage": GIB}
    assert proxy.restart_policy == "Always" and proxy.resize_policy == {"cpu": "NotRequired"}
    assert proxy.resources.requests["nvidia.com/gpu"] == 1
    assert webhook.overhead == {"cpu": 250}


def test_a_pod_without_namespace_or_name_takes_the_requests_and_generate_name() -> None:
    obj = pod_json()
    del obj["metadata"]["namespace"]
    pod = pod_from_json(obj, "shop")
    assert (pod.namespace, pod.name) == ("shop", "web-5d9f8-")


def test_a_bad_quantity_is_dropped_by_the_watch_and_refused_by_the_webhook() -> None:
    obj = copy.deepcopy(_pod())
    obj["spec"]["containers"][0]["resources"]["requests"]["memory"] = "12 8Mi"
    assert "memory" not in pod_from(obj).containers[0].resources.requests
    out = review_pod(review(obj), AdmissionIndex.build([]), 0.0)["response"]
    assert out["allowed"] is True and "patch" not in out
    (warning,) = out["warnings"]
    assert "malformed AdmissionReview" in warning and "requests.memory" in warning
