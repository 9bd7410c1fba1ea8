"""`foresize operator` end to end against the strict API server: it elects itself (Lease),
watches, resizes the target's pods, serves /metrics and the admission webhook, and releases its
Lease on shutdown."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from foresize.shells.kube.operator import run_operator
from foresize.testing.ports import free_port
from support.kube_objects import (
    SUGGESTION,
    namespace,
    pod,
    pod_creation_review,
    seed_workload,
    target,
    wait_for_resizes,
    web_pod,
)
from support.paths import DATA


async def test_operator_runs_everything_and_releases_its_lease(apiserver, operator_options):
    apiserver.seed(namespace("foresize"))  # the operator's own (the manifests create it)
    seed_workload(apiserver)
    apiserver.seed(target(suggestion=SUGGESTION))
    for name in ("web-1", "web-2"):
        apiserver.seed(web_pod(apiserver, name))
    opts = operator_options(server=apiserver.url, webhook_port=free_port(), suggest_interval=3600)
    metrics_port, webhook_port = opts.metrics_port, opts.webhook_port
    stop = asyncio.Event()
    task = asyncio.create_task(run_operator(opts, stop))
    try:
        resized = await wait_for_resizes(apiserver, 2)
        assert len(resized) >= 2, [(r.method, r.path, r.code) for r in apiserver.requests][-20:]
        lease = apiserver.get("Lease", "foresize", "foresize-shard-0")
        assert lease["spec"]["holderIdentity"] == "foresize-0"
        # The pause flag is read with a namespaced GET (the Role in its namespace suffices).
        pause = "/api/v1/namespaces/foresize/configmaps/foresize-pause"
        assert apiserver.calls("GET", f"^{pause}$")
        assert not apiserver.calls("GET", "^/api/v1/configmaps$")
        async with aiohttp.ClientSession() as session:
            review = pod_creation_review(pod("web-3"))
            deadline = time.monotonic() + 30  # generous: a loaded machine is slow, not wrong
            while time.monotonic() < deadline:  # until the webhook has its first index
                async with session.post(
                    f"http://127.0.0.1:{webhook_port}/mutate-pods", json=review
                ) as r:
                    assert r.status == 200
                    answer = await r.json()
                    assert answer["response"]["uid"] == "r-1" and answer["response"]["allowed"]
                if "patch" in answer["response"]:
                    break
                await asyncio.sleep(0.1)
            text = ""
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                async with session.get(f"http://127.0.0.1:{metrics_port}/metrics") as r:
                    text = await r.text()
                if "foresize_resizes_total{" in text and 'source="admission"' in text:
                    break
                await asyncio.sleep(0.1)
        got = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text)
            for s in f.samples
        }
        key = (
            "foresize_resizes_total",
            (
                ("direction", "up"),
                ("outcome", "success"),
                ("resource", "cpu"),
                ("target", "shop/web"),
            ),
        )
        assert got[key] >= 2
        # Every request change is counted, in place and at admission (the pod above).
        assert "patch" in answer["response"]
        changed = {
            labels: v
            for (name, labels), v in got.items()
            if name == "foresize_request_changes_total"
        }
        sources = {dict(labels)["source"] for labels in changed}
        assert sources == {"in_place", "admission"}, changed
        sized: list[dict] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the next pass sends the admission's Event
            sized = [
                r.body
                for r in apiserver.calls("POST", r"/events$")
                if r.body.get("reason") == "SizedAtAdmission"
            ]
            if sized:
                break
            await asyncio.sleep(0.1)
        assert sized and sized[0]["involvedObject"]["kind"] == "AIScaleTarget", sized
        assert sized[0]["involvedObject"]["name"] == "web"
        assert got[("foresize_webhook_duration_seconds_count", ())] >= 1
        assert got[("foresize_loop_duration_seconds_count", ())] >= 1
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)
    lease = apiserver.get("Lease", "foresize", "foresize-shard-0")
    assert "holderIdentity" not in lease["spec"]  # released for the next replica
    assert apiserver.internal_errors == []


def test_cli_reads_the_deployment_environment(monkeypatch, tmp_path):
    """The shipped Deployment configures the operator through FORESIZE_* variables."""
    from typer.testing import CliRunner

    import foresize.shells.kube.operator as operator_module
    from foresize.front.cli import app

    seen = {}

    async def fake_run(opts, stop=None, *, bounded_exit=False):
        seen["opts"] = opts
        seen["bounded_exit"] = bounded_exit

    monkeypatch.setattr(operator_module, "run_operator", fake_run)
    import foresize.adapters.telemetry.logs as logs_module

    # Keep the test process' logging as pytest set it up.
    monkeypatch.setattr(logs_module, "setup_logging", lambda *a, **k: None)
    env = {
        "FORESIZE_NAMESPACE": "fs",
        "FORESIZE_POD_NAME": "foresize-7d9-abcde",
        "FORESIZE_WEBHOOK_SERVICE": "fs-webhook",
        "FORESIZE_WEBHOOK_CONFIGURATION": "fs",
        "FORESIZE_TLS_SECRET": "fs-webhook-tls",
        "FORESIZE_PAUSE_CONFIGMAP": "fs-pause",
        "FORESIZE_WEBHOOK_PORT": "9443",
        "FORESIZE_METRICS_PORT": "9090",
        "FORESIZE_CERT_MANAGER": "true",
        "FORESIZE_EXCLUDE_SELECTOR": "team=payments,foresize.io/in-place=off",
        "FORESIZE_EVICTION_RATE_LIMIT": "0.5",
        "FORESIZE_EVICTION_RATE_BURST": "3",
    }
    result = CliRunner().invoke(app, ["operator", "--server", "http://127.0.0.1:1"], env=env)
    assert result.exit_code == 0, result.output
    o = seen["opts"]
    assert (o.namespace, o.identity, o.webhook_service, o.webhook_configuration) == (
        "fs",
        "foresize-7d9-abcde",
        "fs-webhook",
        "fs",
    )
    assert (o.tls_secret, o.pause_configmap, o.webhook_port, o.metrics_port, o.cert_manager) == (
        "fs-webhook-tls",
        "fs-pause",
        9443,
        9090,
        True,
    )
    assert o.exclude_selector == {"team": "payments", "foresize.io/in-place": "off"}
    assert (o.eviction_rate_limit, o.eviction_rate_burst) == (0.5, 3)
    assert seen["bounded_exit"] is True  # the real process bounds its shutdown
    unlimited = CliRunner().invoke(app, ["operator", "--server", "http://127.0.0.1:1"])
    assert unlimited.exit_code == 0 and seen["opts"].eviction_rate_limit is None  # 0 = off
    negative = CliRunner().invoke(
        app, ["operator", "--server", "http://127.0.0.1:1", "--eviction-rate-limit", "-1"]
    )
    assert negative.exit_code != 0 and "--eviction-rate-limit" in negative.output
    wrong = CliRunner().invoke(
        app, ["operator", "--server", "http://127.0.0.1:1", "--exclude-selector", "team"]
    )
    assert wrong.exit_code != 0 and "--exclude-selector" in str(wrong.exception)
    bad = CliRunner().invoke(app, ["operator", "--kubeconfig", str(tmp_path / "nope")])
    assert bad.exit_code != 0 and "--kubeconfig" in str(bad.exception)


@pytest.mark.parametrize("excluded", [False, True])
async def test_operator_end_to_end_from_collected_history(
    apiserver, tmp_path, excluded, operator_options
):
    """History (2 days of a real trace, in the SQLite store) -> the recommender -> the
    target's status -> the watch -> the vertical planner -> pods/resize; with the
    operator's --exclude-selector matching the Deployment, no resize and an Event."""
    import gzip
    import time

    from foresize.adapters.history.metrics_server import HistorySink, Sample
    from foresize.adapters.history.sqlite import HistoryStore

    crane = DATA / "traces" / "crane-dsp" / "input0.csv.gz"
    with gzip.open(crane, "rt") as f:
        next(f)
        values = [float(line.split(",")[1]) for _, line in zip(range(2 * 1440), f, strict=False)]
    end = (time.time() // 60) * 60
    samples = [
        Sample(
            end - (len(values) - 1 - i) * 60,
            "shop",
            "web",
            f"web-{p}",
            "app",
            v / 100.0,
            200 * 2**20,
        )
        for i, v in enumerate(values)
        for p in (1, 2)
    ]
    db = tmp_path / "history.db"
    store = HistoryStore(db)
    HistorySink(store).add_samples(samples)
    store.close()

    apiserver.kube_version = (1, 35)
    apiserver.seed(namespace("foresize"))
    seed_workload(apiserver)
    apiserver.seed(target())  # no suggestion yet
    for name in ("web-1", "web-2"):
        apiserver.seed(web_pod(apiserver, name))
    opts = operator_options(
        server=apiserver.url,
        history_db=str(db),
        exclude_selector={"app": "web"} if excluded else {},
    )
    stop = asyncio.Event()
    task = asyncio.create_task(run_operator(opts, stop))
    status_path = "/apis/foresize.io/v1/namespaces/shop/aiscaletargets/web/status"
    try:
        resized = []
        for _ in range(150):
            await asyncio.sleep(0.1)
            resized = apiserver.calls("PATCH", r"/resize$", code=200)
            if len(resized) >= 2:
                break
            notes = [
                n
                for r in apiserver.calls("PATCH", f"^{status_path}$", code=200)
                for n in r.body.get("status", {}).get("vertical_notes") or []
            ]
            if excluded and any("excluded" in n for n in notes):
                await asyncio.sleep(0.5)  # a few more passes: still nothing is resized
                break
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)
    if excluded:
        assert apiserver.calls("PATCH", r"/resize$") == []
        events = [r.body for r in apiserver.calls("POST", r"/events$")]
        assert any(e.get("reason") == "Excluded" for e in events), events
        return
    suggestions = [
        r.body["status"]["vertical_suggestion"]
        for r in apiserver.calls("PATCH", f"^{status_path}$", code=200)
        if "vertical_suggestion" in r.body.get("status", {})
    ]
    assert suggestions, "the recommender wrote a suggestion from the collected history"
    cpu = suggestions[0]["containers"][0]["requests"]["cpu"]
    assert len(resized) >= 2, [(r.method, r.path, r.code) for r in apiserver.requests][-15:]
    for r in resized:
        assert {
            "op": "add",
            "path": "/spec/containers/0/resources/requests/cpu",
            "value": cpu,
        } in r.body
    assert apiserver.internal_errors == []


@pytest.mark.parametrize(
    ("args", "env", "warned"),
    [
        (["--liveness-timeout", "45s"], {}, False),
        ([], {"FORESIZE_LIVENESS_TIMEOUT": "45s"}, False),
        (["--stall-timeout", "45s"], {}, True),
        ([], {"FORESIZE_STALL_TIMEOUT": "45s"}, True),
    ],
)
def test_the_liveness_timeout_flag_and_its_deprecated_old_name(
    monkeypatch, args, env, warned
) -> None:
    """review N-10: the operator's liveness timeout was `--stall-timeout`, the name of the
    resize-stall fallback (`spec.vertical.disruption.stall_timeout`). It is
    `--liveness-timeout`; the old name still works for one release, with a warning."""
    from typer.testing import CliRunner

    from foresize.front.cli import app
    from foresize.shells.kube import operator as kube_operator

    seen = {}

    async def fake_run(opts):
        seen["opts"] = opts
        return 0

    monkeypatch.setattr(kube_operator, "run_operator_process", fake_run)
    result = CliRunner().invoke(app, ["operator", "--server", "http://127.0.0.1:1", *args], env=env)
    assert result.exit_code == 0, result.output
    assert seen["opts"].liveness_timeout == 45.0
    assert ("--stall-timeout (FORESIZE_STALL_TIMEOUT) is deprecated" in result.stderr) is warned
