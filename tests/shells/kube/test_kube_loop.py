"""The planning pass does not hold the operator's event loop: while a (deliberately slow)
pass runs, the admission webhook answers and the shard Lease is renewed.

The pass is made slow by an injected planner that waits on an event the test releases, so
the test is deterministic: with the pass on the loop, nothing else can run until the
planner gives up waiting, and by then the pass is over."""

from __future__ import annotations

import asyncio
import threading
import time

import aiohttp

import foresize.shells.kube.shell as shell_module
from foresize.core.reconcile import plan_pass
from foresize.shells.kube.operator import run_operator
from foresize.testing.ports import free_port
from support.kube_objects import (
    SUGGESTION,
    namespace,
    pod,
    pod_creation_review,
    seed_workload,
    target,
    web_pod,
)

# Generous for a loaded 2-core machine: the webhook's own work is a few milliseconds.
WEBHOOK_BOUND = 1.0
# How long the slow pass holds out for the test's release (the pass-on-the-loop failure
# mode waits this long before anything else can run).
PASS_HOLD = 8.0


async def test_webhook_and_lease_renewals_are_served_while_a_pass_runs(
    apiserver, monkeypatch, operator_options
):
    apiserver.seed(namespace("foresize"))
    seed_workload(apiserver)
    apiserver.seed(target(suggestion=SUGGESTION))
    for name in ("web-1", "web-2"):
        apiserver.seed(web_pod(apiserver, name))

    entered = threading.Event()
    release = threading.Event()
    finished = threading.Event()

    def slow_pass(*args, **kwargs):
        if not entered.is_set():  # only the first pass is slow
            entered.set()
            release.wait(PASS_HOLD)
            finished.set()
        return plan_pass(*args, **kwargs)

    monkeypatch.setattr(shell_module, "plan_pass", slow_pass)
    webhook_port = free_port()
    opts = operator_options(
        server=apiserver.url,
        lease_retry=0.2,
        lease_renew_deadline=2.0,
        lease_duration=3.0,
        webhook_port=webhook_port,
        suggest_interval=3600,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(run_operator(opts, stop))
    try:
        assert await asyncio.to_thread(entered.wait, 30.0), "no pass started"
        started = len(apiserver.requests)
        review = pod_creation_review(pod("web-3"))
        async with aiohttp.ClientSession() as session:
            t0 = time.perf_counter()
            async with session.post(
                f"http://127.0.0.1:{webhook_port}/mutate-pods", json=review
            ) as r:
                assert r.status == 200
                answer = await r.json()
            latency = time.perf_counter() - t0
        assert answer["response"]["uid"] == "r-1" and answer["response"]["allowed"]
        assert not finished.is_set(), "the webhook was answered only once the pass was over"
        assert latency < WEBHOOK_BOUND, latency
        renewed = []
        for _ in range(50):  # a few renew intervals
            renewed = [
                r
                for r in apiserver.requests[started:]
                if r.resource == "leases" and r.method in ("PUT", "PATCH") and r.code == 200
            ]
            if renewed:
                break
            await asyncio.sleep(0.05)
        assert renewed, "no Lease renewal while the pass ran"
        assert not finished.is_set(), "the Lease was renewed only once the pass was over"
        release.set()
        # The slow pass still lands its actions (the Lease gate let them through).
        for _ in range(100):
            if len(apiserver.calls("PATCH", r"/resize$", code=200)) >= 2:
                break
            await asyncio.sleep(0.1)
        assert len(apiserver.calls("PATCH", r"/resize$", code=200)) >= 2
    finally:
        release.set()
        stop.set()
        await asyncio.wait_for(task, 20)
    assert apiserver.internal_errors == []
