"""CronJob targets on a real API server (the strict test API server serving batch/v1
CronJob and Job): the informers list and watch both kinds under the shipped RBAC, the
cache resolves a Job's pod to its CronJob, and the pod webhook's decision sizes a new
run's pod from the target's suggestion."""

from __future__ import annotations

import asyncio
import contextlib

from foresize.core.admission.index import AdmissionIndex
from foresize.core.admission.pod import decide_pod
from foresize.core.cluster.kubejson import pod_from
from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.handlers import WATCHED, parse_foresize
from foresize.shells.kube.informer import Informer, Informers
from foresize.shells.kube.state import ClusterState
from support.kube_objects import container, node, pod

REPORT = [container("report", requests={"cpu": "2", "memory": "4Gi"}, limits={"memory": "4Gi"})]
SUGGESTION = {
    "uid": "s1",
    "containers": [
        {
            "name": "report",
            "requests": {"cpu": "1100m", "memory": "2253Mi"},
            "limits": {"memory": "2253Mi"},
        }
    ],
}


def _cronjob() -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "report", "namespace": "shop"},
        "spec": {
            "schedule": "0 2 * * *",
            "jobTemplate": {
                "spec": {
                    "template": {
                        "metadata": {"labels": {"app": "report"}},
                        "spec": {"restartPolicy": "OnFailure", "containers": REPORT},
                    }
                }
            },
        },
    }


def _job(cron_uid: str) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "report-29666666",
            "namespace": "shop",
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "CronJob",
                    "name": "report",
                    "uid": cron_uid,
                    "controller": True,
                }
            ],
        },
        "spec": {"template": {"spec": {"restartPolicy": "OnFailure", "containers": REPORT}}},
    }


def _target() -> dict:
    return {
        "apiVersion": "foresize.io/v1",
        "kind": "AIScaleTarget",
        "metadata": {"name": "report", "namespace": "shop"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "batch/v1", "kind": "CronJob", "name": "report"},
            "vertical": {"mode": "autonomous"},
        },
    }


async def test_a_cronjobs_run_is_followed_and_sized_at_creation(apiserver):
    apiserver.seed(node())
    cron = apiserver.seed(_cronjob())
    job = apiserver.seed(_job(cron["metadata"]["uid"]))
    running = pod(
        "report-29666666-x7k2p",
        owner=("Job", "report-29666666", job["metadata"]["uid"]),
        labels={"app": "report"},
        containers=REPORT,
    )
    running["metadata"]["ownerReferences"][0]["apiVersion"] = "batch/v1"
    apiserver.seed(running)
    state = ClusterState(target_parser=parse_foresize)
    api = KubeApi.from_url(apiserver.url)
    informers = Informers([Informer(api, state, w) for w in WATCHED if not w.optional])
    stop = asyncio.Event()
    watching = informers.tasks(stop)
    try:
        assert await asyncio.wait_for(informers.wait_synced(stop), 10)
        answer = await api.request(
            "POST", "/apis/foresize.io/v1/namespaces/shop/aiscaletargets", _target()
        )
        assert answer.code == 201, answer.body
        answer = await api.request(
            "PATCH",
            "/apis/foresize.io/v1/namespaces/shop/aiscaletargets/report/status",
            {"status": {"hasEnoughDataToScale": True, "vertical_suggestion": SUGGESTION}},
            "application/merge-patch+json",
        )
        assert answer.code == 200, answer.body
        for _ in range(100):  # until the watch delivered the status write
            seen_target = state.foresize["AIScaleTarget"].get(("shop", "report"))
            if seen_target is not None and seen_target.status.vertical_suggestion is not None:
                break
            await asyncio.sleep(0.1)
        snap = state.snapshot(0.0)
        (seen,) = [p for p in snap.pods if p.name == "report-29666666-x7k2p"]
        top = snap.top_owner(seen)
        assert top is not None and top.key == "CronJob/shop/report"
        assert [c.name for c in top.template.containers] == ["report"]
        # The next run's pod, as the API server hands it to the webhook at CREATE.
        new = pod_from(
            {
                "metadata": {
                    "generateName": "report-29666667-",
                    "namespace": "shop",
                    "ownerReferences": [
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "name": "report-29666667",
                            "controller": True,
                        }
                    ],
                },
                "spec": {"containers": REPORT},
            },
            strict=True,
        )
        decision = decide_pod(new, None, AdmissionIndex.from_snapshot(snap), 0.0)
        resources = decision.containers["report"]
        assert resources.requests == {"cpu": 1100, "memory": 2253 * 2**20}
        assert resources.limits == {"memory": 2253 * 2**20}
        # Nothing the operator sent was refused (the shipped RBAC grants the batch watches).
        refused = [(r.method, r.path, r.code) for r in apiserver.requests if r.code >= 400]
        assert refused == [], refused
        assert apiserver.calls("GET", r"^/apis/batch/v1/cronjobs")
        assert apiserver.calls("GET", r"^/apis/batch/v1/jobs")
    finally:
        stop.set()
        for task in watching:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await api.close()


async def test_a_bare_job_groups_target_is_served_and_its_next_job_sized_at_creation(apiserver):
    """A JobGroup target (`cluster.jobs`): the API server's schema takes it, the cache
    keys the group's pods to the group's history, and the webhook sizes a pod of a new
    bare Job of the group from the target's suggestion."""
    from foresize.core.cluster.jobs import JOB_GROUP_LABEL
    from foresize.core.history import history_workload_of

    group = {JOB_GROUP_LABEL: "nightly"}
    apiserver.seed(node())
    job = apiserver.seed(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "etl-manual-1", "namespace": "shop"},
            "spec": {
                "template": {
                    "metadata": {"labels": group},
                    "spec": {"restartPolicy": "OnFailure", "containers": REPORT},
                }
            },
        }
    )
    running = pod(
        "etl-manual-1-x7k2p",
        owner=("Job", "etl-manual-1", job["metadata"]["uid"]),
        labels=group,
        containers=REPORT,
    )
    running["metadata"]["ownerReferences"][0]["apiVersion"] = "batch/v1"
    apiserver.seed(running)
    state = ClusterState(target_parser=parse_foresize)
    api = KubeApi.from_url(apiserver.url)
    informers = Informers([Informer(api, state, w) for w in WATCHED if not w.optional])
    stop = asyncio.Event()
    watching = informers.tasks(stop)
    target = _target()
    target["metadata"]["name"] = "nightly"
    target["spec"]["scaleTargetRef"] = {"kind": "JobGroup", "name": "nightly"}
    try:
        assert await asyncio.wait_for(informers.wait_synced(stop), 10)
        path = "/apis/foresize.io/v1/namespaces/shop/aiscaletargets"
        answer = await api.request("POST", path, target)
        assert answer.code == 201, answer.body
        # The schema refuses what a CronJob target refuses, for a group too.
        bad = {**target, "metadata": {"name": "bad", "namespace": "shop"}}
        bad["spec"] = {**target["spec"], "horizontal": {"mode": "autonomous"}}
        refused = await api.request("POST", path, bad)
        assert refused.code == 422 and "no replicas to scale" in str(refused.body)
        answer = await api.request(
            "PATCH",
            f"{path}/nightly/status",
            {"status": {"hasEnoughDataToScale": True, "vertical_suggestion": SUGGESTION}},
            "application/merge-patch+json",
        )
        assert answer.code == 200, answer.body
        for _ in range(100):
            seen_target = state.foresize["AIScaleTarget"].get(("shop", "nightly"))
            if seen_target is not None and seen_target.status.vertical_suggestion is not None:
                break
            await asyncio.sleep(0.1)
        snap = state.snapshot(0.0)
        (seen,) = [p for p in snap.pods if p.name == "etl-manual-1-x7k2p"]
        assert history_workload_of(seen, snap.top_owner(seen)) == ("JobGroup", "jobgroup:nightly")
        new = pod_from(
            {
                "metadata": {
                    "generateName": "etl-manual-2-",
                    "namespace": "shop",
                    "labels": group,
                    "ownerReferences": [
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "name": "etl-manual-2",
                            "controller": True,
                        }
                    ],
                },
                "spec": {"containers": REPORT},
            },
            strict=True,
        )
        decision = decide_pod(new, None, AdmissionIndex.from_snapshot(snap), 0.0)
        assert decision.target is not None and decision.target.name == "nightly"
        assert decision.containers["report"].requests == {"cpu": 1100, "memory": 2253 * 2**20}
    finally:
        stop.set()
        for task in watching:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await api.close()
