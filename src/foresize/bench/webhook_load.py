"""What `foresize bench webhook` (and `bench loop`) send: a synthetic index of many targets,
seeded pod AdmissionReviews against it, the handler's own cost without the network, and
the client's timeout (the webhook configuration's)."""

from __future__ import annotations

import json
import random
import statistics
import time
from typing import Any


def synthetic_index(n_targets: int, seed: int = 7):
    """`n_targets` autonomous Deployments (with suggestions) in 20 namespaces, plus as
    many recommendation-mode ones: a realistic lookup load for the pod decision."""
    from foresize.core.admission.index import AdmissionIndex
    from foresize.core.cluster.model import ContainerSuggestion, Suggestion
    from foresize.core.cluster.target import TargetView
    from foresize.core.cluster.target_fields import ContainerPolicy, ResourcePolicy

    rng = random.Random(seed)
    views = []
    for i in range(2 * n_targets):
        ns = f"ns-{i % 20}"
        sug = Suggestion(
            uid=f"s{i}",
            created_at=0.0,
            containers={
                "app": ContainerSuggestion(
                    "app", {"cpu": rng.randint(50, 2000), "memory": rng.randint(64, 4096) << 20}
                ),
                "sidecar": ContainerSuggestion("sidecar", {"cpu": 20, "memory": 32 << 20}),
            },
        )
        views.append(
            TargetView(
                kind="AIScaleTarget",
                namespace=ns,
                name=f"wl-{i}",
                ref_kind="Deployment",
                ref_name=f"wl-{i}",
                vertical_mode="autonomous" if i < n_targets else "recommendation",
                containers=(
                    ContainerPolicy("*", ResourcePolicy(lower=10), ResourcePolicy(lower=16 << 20)),
                    ContainerPolicy(
                        "app",
                        ResourcePolicy(lower=10, limit_ratio=2.0),
                        ResourcePolicy(lower=16 << 20, limit_ratio=1.5),
                    ),
                ),
                suggestion=sug,
            )
        )
    return AdmissionIndex.build(views)


def review_bodies(n_targets: int, count: int, seed: int = 11) -> list[bytes]:
    """Pre-serialised pod CREATE reviews: 80% for autonomous targets (patched), 20% for
    recommendation-mode ones (no patch), with realistic pod bodies."""
    rng = random.Random(seed)
    bodies = []
    for k in range(count):
        i = rng.randrange(n_targets) if rng.random() < 0.8 else n_targets + rng.randrange(n_targets)
        h = f"{rng.getrandbits(32):08x}"[:9]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": f"wl-{i}-{h}-",
                "namespace": f"ns-{i % 20}",
                "labels": {"app": f"wl-{i}", "pod-template-hash": h},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": f"wl-{i}-{h}",
                        "uid": f"uid-{k}",
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "containers": [
                    {
                        "name": "app",
                        "image": "registry.example.com/app:1.2.3",
                        "env": [{"name": f"VAR_{j}", "value": "x" * 20} for j in range(10)],
                        "resources": {
                            "requests": {"cpu": "100m", "memory": "128Mi"},
                            "limits": {"cpu": "200m", "memory": "256Mi"},
                        },
                    },
                    {
                        "name": "sidecar",
                        "image": "registry.example.com/proxy:2",
                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                    },
                ],
                "serviceAccountName": "default",
            },
        }
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": f"req-{k}",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": f"ns-{i % 20}",
                "operation": "CREATE",
                "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
                "object": pod,
                "dryRun": False,
            },
        }
        bodies.append(json.dumps(review).encode())
    return bodies


def handler_cost(n_targets: int, count: int = 2000) -> dict[str, float]:
    """Median microseconds per review of the pure handlers (JSON decode, decision, JSON
    encode; no HTTP, no TLS), median of 5 passes: what the server spends of its own."""
    from foresize.core.admission.review import review_noop, review_pod

    index = synthetic_index(n_targets)
    bodies = review_bodies(n_targets, count)
    out = {}
    for name, fn in (("pod", review_pod), ("noop", review_noop)):
        runs = []
        for _ in range(5):
            t0 = time.perf_counter()
            for b in bodies:
                json.dumps(fn(json.loads(b), index, 0.0))
            runs.append((time.perf_counter() - t0) / len(bodies) * 1e6)
        out[name] = statistics.median(runs)
    return out


def client_timeout() -> Any:
    import aiohttp

    return aiohttp.ClientTimeout(total=3.0)  # the webhook configuration's timeoutSeconds
