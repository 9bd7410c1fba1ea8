"""The real webhook server over real HTTPS on loopback, with real AdmissionReview JSON."""

from __future__ import annotations

import aiohttp
import pytest

from foresize.core.admission.index import AdmissionIndex
from foresize.shells.webhook.certs import (
    client_ssl_context,
    generate_self_signed,
    server_ssl_context,
)
from foresize.shells.webhook.server import AdmissionState, WebhookServer, create_app
from support.admission import (
    apply_patch,
    decode_patch,
    pod_json,
    review,
    scale_review,
    target_manifest,
)

SUGGESTION = {"app": {"requests": {"cpu": "250m", "memory": "256Mi"}}}


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    bundle = generate_self_signed(["localhost", "127.0.0.1"])
    _ca, crt, key = bundle.write(tmp_path_factory.mktemp("tls"))
    return bundle, crt, key


def default_index() -> AdmissionIndex:
    return AdmissionIndex.build(
        [
            target_manifest("web", ref="web", vmode="autonomous", suggestion=SUGGESTION),
            target_manifest("api", ref="api", vmode="recommendation", suggestion=SUGGESTION),
            target_manifest(
                "front",
                ref="front",
                vmode="recommendation",
                hmode="autonomous",
                predicted=6,
                min_replicas=1,
                max_replicas=20,
            ),
        ]
    )


class Client:
    def __init__(self, session: aiohttp.ClientSession, base: str):
        self.session = session
        self.base = base

    async def post(self, path: str, payload=None, *, data: bytes | None = None):
        kwargs = {"json": payload} if data is None else {"data": data}
        async with self.session.post(self.base + path, **kwargs) as resp:
            assert resp.status == 200, await resp.text()
            return await resp.json()

    async def get(self, path: str) -> int:
        async with self.session.get(self.base + path) as resp:
            return resp.status


@pytest.fixture
async def serve(certs):
    bundle, crt, key = certs
    servers = []
    sessions = []

    async def start(provider, **app_options):
        server = WebhookServer(
            create_app(provider, clock=lambda: 1000.0, **app_options),
            host="127.0.0.1",
            port=0,
            ssl_context=server_ssl_context(crt, key),
        )
        port = await server.start()
        servers.append(server)
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=client_ssl_context(bundle.ca_pem))
        )
        sessions.append(session)
        return Client(session, f"https://127.0.0.1:{port}")

    yield start
    for s in sessions:
        await s.close()
    for srv in servers:
        await srv.stop()


async def test_autonomous_pod_gets_suggested_resources_and_annotation(serve):
    client = await serve(AdmissionState(default_index()))
    pod = pod_json()
    out = await client.post("/mutate-pods", review(pod))
    resp = out["response"]
    assert out["kind"] == "AdmissionReview" and out["apiVersion"] == "admission.k8s.io/v1"
    assert resp["uid"] == "11111111-2222-3333-4444-555555555555"
    assert resp["allowed"] is True
    patched = apply_patch(pod, decode_patch(out))
    res = patched["spec"]["containers"][0]["resources"]
    assert res["requests"] == {"cpu": "250m", "memory": "256Mi", "ephemeral-storage": "1Gi"}
    assert res["limits"] == {"memory": "512Mi"}  # no limit.ratio: limit kept, no new cpu limit
    assert patched["metadata"]["annotations"] == {"foresize.io/managed": "true"}


async def test_existing_annotations_are_kept_when_annotating(serve):
    client = await serve(AdmissionState(default_index()))
    pod = pod_json(annotations={"team": "payments"})
    out = await client.post("/mutate-pods", review(pod))
    patched = apply_patch(pod, decode_patch(out))
    assert patched["metadata"]["annotations"] == {"team": "payments", "foresize.io/managed": "true"}


async def test_recommendation_mode_pod_gets_no_patch(serve):
    client = await serve(AdmissionState(default_index()))
    pod = pod_json(owner=("ReplicaSet", "api-5d9f8"))
    out = await client.post("/mutate-pods", review(pod))
    assert out["response"]["allowed"] is True
    assert decode_patch(out) is None
    assert "patchType" not in out["response"]


async def test_pod_with_nothing_to_change_gets_no_patch_and_no_annotation(serve):
    client = await serve(AdmissionState(default_index()))
    pod = pod_json(
        containers=[{"name": "app", "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}}]
    )
    out = await client.post("/mutate-pods", review(pod))
    assert out["response"]["allowed"] is True
    assert decode_patch(out) is None


async def test_update_is_never_mutated(serve):
    client = await serve(AdmissionState(default_index()))
    pod = pod_json()
    out = await client.post("/mutate-pods", review(pod, operation="UPDATE", old=pod))
    assert out["response"]["allowed"] is True
    assert decode_patch(out) is None
    # The same pod on CREATE is mutated: the UPDATE answer is not an accident of the pod.
    assert decode_patch(await client.post("/mutate-pods", review(pod))) is not None


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}',
        b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u1",'
        b' "kind": {"kind": "Pod"}, "operation": "CREATE", "object": {"spec": {"containers": [{'
        b'"name": "a", "resources": {"requests": {"cpu": "lots"}}}]}}}}',
    ],
    ids=["not-json", "no-request", "bad-quantity"],
)
async def test_malformed_review_is_allowed_with_warning(serve, body):
    client = await serve(AdmissionState(default_index()))
    out = await client.post("/mutate-pods", data=body)
    assert out["response"]["allowed"] is True
    assert any("foresize" in w for w in out["response"]["warnings"])
    assert "patch" not in out["response"]


async def test_unknown_kind_is_allowed_with_warning(serve):
    client = await serve(AdmissionState(default_index()))
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {}}
    out = await client.post("/mutate-pods", review(cm, kind="ConfigMap", resource="configmaps"))
    assert out["response"]["uid"] == "11111111-2222-3333-4444-555555555555"
    assert out["response"]["allowed"] is True
    assert "ConfigMap" in out["response"]["warnings"][0]


async def test_internal_exception_is_allowed_with_warning(serve):
    def broken_state():
        raise RuntimeError("snapshot store unavailable")

    client = await serve(broken_state)
    out = await client.post("/mutate-pods", review(pod_json()))
    assert out["response"]["allowed"] is True
    assert "snapshot store unavailable" in out["response"]["warnings"][0]
    assert "patch" not in out["response"]


async def test_internal_exception_inside_the_decision_is_allowed_with_warning(serve):
    class ExplodingIndex(AdmissionIndex):
        def target_for_pod(self, pod, owner=None):
            raise KeyError("corrupt index")

    client = await serve(lambda: ExplodingIndex())
    out = await client.post("/mutate-pods", review(pod_json()))
    assert out["response"]["allowed"] is True
    assert "KeyError" in out["response"]["warnings"][0]


async def test_scale_write_below_prediction_is_raised_above_is_kept(serve):
    client = await serve(AdmissionState(default_index()))
    below = scale_review("front", 3)
    out = await client.post("/mutate-scale", below)
    patched = apply_patch(below["request"]["object"], decode_patch(out))
    assert patched["spec"]["replicas"] == 6
    assert "annotations" not in patched["metadata"]
    above = await client.post("/mutate-scale", scale_review("front", 9))
    assert decode_patch(above) is None and above["response"]["allowed"] is True
    # A workload without a horizontal-autonomous target is left alone.
    other = await client.post("/mutate-scale", scale_review("web", 1))
    assert decode_patch(other) is None


async def test_validate_targets_names_the_field(serve):
    client = await serve(AdmissionState(default_index()))
    bad = target_manifest(
        "cart",
        ref="cart",
        containers=[{"name": "app", "cpu": {"lowerbound": "2", "upperbound": "500m"}}],
    )
    out = await client.post(
        "/validate-targets",
        review(bad, kind="AIScaleTarget", group="foresize.io", resource="aiscaletargets"),
    )
    assert out["response"]["allowed"] is False
    assert "spec.vertical.containers[0].cpu.upperbound" in out["response"]["status"]["message"]
    good = target_manifest("cart", ref="cart")
    ok = await client.post(
        "/validate-targets",
        review(good, kind="AIScaleTarget", group="foresize.io", resource="aiscaletargets"),
    )
    assert ok["response"]["allowed"] is True


async def test_validate_targets_checks_window_zones_with_the_zone_database(serve):
    client = await serve(AdmissionState(default_index()))
    window = {"schedule": "0 2 * * *", "duration": "2h", "timeZone": "Europe/Berlim"}
    bad = target_manifest("cart", ref="cart")
    bad["spec"]["vertical"]["maintenance"] = {"windows": [window]}
    out = await client.post(
        "/validate-targets",
        review(bad, kind="AIScaleTarget", group="foresize.io", resource="aiscaletargets"),
    )
    assert out["response"]["allowed"] is False
    message = out["response"]["status"]["message"]
    assert message.startswith("spec.vertical.maintenance.windows[0].timeZone: 'Europe/Berlim'")
    window["timeZone"] = "Europe/Berlin"
    ok = await client.post(
        "/validate-targets",
        review(bad, kind="AIScaleTarget", group="foresize.io", resource="aiscaletargets"),
    )
    assert ok["response"]["allowed"] is True


async def test_health_and_readiness(serve):
    state = AdmissionState()
    client = await serve(state)
    assert await client.get("/healthz") == 200
    assert await client.get("/readyz") == 503
    out = await client.post("/mutate-pods", review(pod_json()))
    assert out["response"]["allowed"] is True and "not ready" in out["response"]["warnings"][0]
    state.set(default_index())
    assert await client.get("/readyz") == 200


async def test_a_failing_state_provider_means_not_ready_and_reviews_fail_open(serve):
    def lost() -> AdmissionIndex:
        raise RuntimeError("index gone")

    client = await serve(lost)
    assert await client.get("/healthz") == 200
    assert await client.get("/readyz") == 503
    out = await client.post("/mutate-pods", review(pod_json(), uid="u-1"))
    assert out["response"]["allowed"] is True and "patch" not in out["response"]
    assert "internal error (RuntimeError: index gone)" in out["response"]["warnings"][0]


async def test_the_noop_endpoint_needs_no_index_and_exists_only_when_asked(serve):
    bench = await serve(lambda: None, noop_endpoint=True)
    out = await bench.post("/noop", review(pod_json(), uid="u-2"))
    assert out["response"] == {"uid": "u-2", "allowed": True}
    plain = await serve(lambda: None)
    async with plain.session.post(plain.base + "/noop", json=review(pod_json())) as resp:
        assert resp.status == 404


async def test_validate_daemonset_autoscaler_conflict_and_bounds(serve):
    existing = {
        "apiVersion": "foresize.io/v1",
        "kind": "DaemonSetAutoscaler",
        "metadata": {"name": "agent", "namespace": "mon"},
        "spec": {"scaleTargetRef": {"name": "node-agent"}},
    }
    client = await serve(AdmissionState(AdmissionIndex.build([], daemonset_autoscalers=[existing])))
    second = {
        **existing,
        "metadata": {"name": "agent-2", "namespace": "mon"},
        "spec": {
            "scaleTargetRef": {"name": "node-agent"},
            "containers": [{"name": "*", "memory": {"lowerbound": "1Gi", "upperbound": "1Mi"}}],
        },
    }
    out = await client.post(
        "/validate-targets",
        review(
            second,
            kind="DaemonSetAutoscaler",
            group="foresize.io",
            resource="daemonsetautoscalers",
            namespace="mon",
        ),
    )
    message = out["response"]["status"]["message"]
    assert out["response"]["allowed"] is False
    assert "spec.containers[0].memory.upperbound" in message
    assert "spec.scaleTargetRef: DaemonSet mon/node-agent is already autoscaled" in message


@pytest.mark.parametrize("policy", ["leave", "override"])
async def test_hpa_scaled_resource_is_left_alone_unless_overridden(serve, policy):
    # The operator's path: the webhook's state is rebuilt from the watched snapshot, which
    # carries the HPAs; an HPA on cpu utilisation keeps new pods' cpu at the template
    # value (as running pods keep theirs) unless the target says "override".
    from foresize.core.api.types import parse_target
    from foresize.core.cluster.model import HorizontalPodAutoscaler, HPAMetric
    from foresize.core.cluster.snapshot import ClusterSnapshot

    manifest = target_manifest("web", ref="web", vmode="autonomous", suggestion=SUGGESTION)
    manifest["spec"]["vertical"]["hpa_resource_policy"] = policy
    hpa = HorizontalPodAutoscaler(
        "shop", "web", "Deployment", "web", 2, 10, [HPAMetric("Resource", "cpu", 70)]
    )
    state = AdmissionState()
    state.update_from_snapshot(
        ClusterSnapshot(now=1000.0, targets=[parse_target(manifest)], hpas=[hpa])
    )
    client = await serve(state)
    pod = pod_json()
    out = await client.post("/mutate-pods", review(pod))
    patched = apply_patch(pod, decode_patch(out))
    requests = patched["spec"]["containers"][0]["resources"]["requests"]
    assert requests["memory"] == "256Mi"
    assert requests["cpu"] == ("100m" if policy == "leave" else "250m")
    assert patched["metadata"]["annotations"] == {"foresize.io/managed": "true"}
