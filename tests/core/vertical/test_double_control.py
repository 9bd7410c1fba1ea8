"""Refusing double control (issue 27): a workload another vertical autoscaler acts on (a
VerticalPodAutoscaler in any mode but Off, a GKE MultidimPodAutoscaler) is not resized by
Foresize, in place or at admission; the target's condition and one Event name the object
that claims it. In both shells."""

from __future__ import annotations

from typing import Any

import pytest

from foresize.core.admission.pod import decide_pod
from foresize.core.api.quantity import MIB
from foresize.core.cluster import kubejson
from foresize.core.cluster.actions import EmitEvent, ResizePod
from foresize.core.cluster.model import VerticalClaim, Workload
from foresize.core.cluster.snapshot import claim_for
from foresize.core.lifecycle.daemonset import plan_dsa
from foresize.core.recommend.suggestions import plan_suggestions
from foresize.core.vertical import WorkerState, plan
from foresize.shells.kube.api import KubeApi
from foresize.shells.kube.executor import KubeExecutor
from foresize.shells.kube.shell import KubeShell
from foresize.shells.sim.scenario import parse_scenario
from support.guard import _dsa, _dsa_snapshot, _sugg_all
from support.kube import TPATH, base_state, pod, seed_base, target
from support.kube_objects import VPA_CRD, load_state, vpa
from support.selectors import NOW, _history, _snapshot, _target
from support.sim import container, make_sim, operator, pods_of, suggest, workload


@pytest.mark.parametrize(
    "mode,acting",
    [
        ("Auto", True),
        ("Recreate", True),
        ("Initial", True),
        ("InPlaceOrRecreate", True),
        ("InPlace", True),
        ("Off", False),
        (None, True),  # updatePolicy unset: the VPA API's default is Auto
    ],
)
def test_vpa_modes_that_claim_the_workload(mode, acting):
    claim = kubejson.vertical_claim_from("VerticalPodAutoscaler", vpa(mode=mode))
    assert claim.target_kind == "Deployment" and claim.target_name == "web"
    assert claim.acting is acting
    found = claim_for([claim], "Deployment", "shop", "web")
    assert (found is claim) if acting else (found is None)
    assert claim_for([claim], "Deployment", "other", "web") is None


def test_multidim_pod_autoscaler_claims_through_its_scale_target_ref():
    mpa = {
        "apiVersion": "autoscaling.gke.io/v1beta1",
        "kind": "MultidimPodAutoscaler",
        "metadata": {"name": "m", "namespace": "shop"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}},
    }
    claim = kubejson.vertical_claim_from("MultidimPodAutoscaler", mpa)
    assert claim.acting and claim.describe() == "MultidimPodAutoscaler shop/m (updateMode Auto)"


# --------------------------------------------------------------------------- simulator


def vpa_sim(mode: str) -> Any:
    return make_sim(
        [workload("web", 2, containers=[container(cpu="100m")])],
        nodes=2,
        cpu="4",
        vertical_autoscalers=[
            {
                "name": "web-vpa",
                "target": {"kind": "Deployment", "name": "web"},
                "update_mode": mode,
            }
        ],
    )


def test_sim_workload_under_an_acting_vpa_is_not_resized_and_the_target_says_why():
    sim = vpa_sim("Auto")
    op = operator(
        sim, "in_place", disruption={"max_disrupted": 5}, targets=["Deployment/default/web"]
    )
    suggest(op, "web", app=({"cpu": 300, "memory": 256 * MIB}, {"cpu": 600, "memory": 512 * MIB}))
    sim.run(300)
    assert sim.events.count("ResizeApplied") == 0
    assert all(p.containers[0].resources.requests["cpu"] == 500 for p in pods_of(sim, "web"))
    events = sim.events.query("Event", reason="ClaimedByAnotherAutoscaler")
    assert len(events) == 1 and "VerticalPodAutoscaler default/web-vpa" in events[0].message
    status = sim.target_status[("AIScaleTarget", "default", "web")]
    cond = next(c for c in status["conditions"] if c["type"] == "ClaimedByAnotherAutoscaler")
    assert cond["status"] == "True" and "web-vpa (updateMode Auto)" in cond["message"]
    # The VPA is switched to Off: Foresize acts, and the condition turns False.
    sim.vertical_claims = [
        VerticalClaim("VerticalPodAutoscaler", "default", "web-vpa", "Deployment", "web", "Off")
    ]
    sim.run(300)
    assert sim.events.count("ResizeApplied") >= 1
    status = sim.target_status[("AIScaleTarget", "default", "web")]
    cond = next(c for c in status["conditions"] if c["type"] == "ClaimedByAnotherAutoscaler")
    assert cond["status"] == "False"


def test_sim_vpa_off_leaves_foresize_in_charge():
    sim = vpa_sim("Off")
    op = operator(
        sim, "in_place", disruption={"max_disrupted": 5}, targets=["Deployment/default/web"]
    )
    suggest(op, "web", app=({"cpu": 300, "memory": 256 * MIB}, {"cpu": 600, "memory": 512 * MIB}))
    sim.run(300)
    assert sim.events.count("ResizeApplied") >= 1
    assert sim.events.count("Event", reason="ClaimedByAnotherAutoscaler") == 0


def test_sim_new_pods_of_a_claimed_workload_keep_their_template():
    """Admission: the pod webhook leaves the pods of a claimed workload as written."""
    sim = vpa_sim("Initial")
    op = operator(
        sim, "recreate", disruption={"max_disrupted": 5}, targets=["Deployment/default/web"]
    )
    suggest(op, "web", app=({"cpu": 300, "memory": 256 * MIB}, {"cpu": 600, "memory": 512 * MIB}))
    sim.run(120)
    pod0 = pods_of(sim, "web")[0]
    decision = decide_pod(pod0, None, op.admission.index(), sim.now)
    assert not decision.changed
    assert any("VerticalPodAutoscaler default/web-vpa" in w for w in decision.warnings)
    assert sim.events.count("Evicted") == 0


def test_scenario_vertical_autoscalers_are_checked():
    base = {
        "name": "b",
        "nodes": [{"name": "n", "cpu": "4", "memory": "8Gi"}],
        "workloads": [{"kind": "Deployment", "name": "web", "containers": [{"name": "app"}]}],
    }
    sc = parse_scenario(
        {**base, "vertical_autoscalers": [{"name": "v", "target": {"name": "web"}}]}, "t.yaml"
    )
    assert sc.vertical_autoscalers[0].update_mode == "Auto"
    with pytest.raises(Exception, match=r"vertical_autoscalers\[0\]\.kind"):
        parse_scenario(
            {
                **base,
                "vertical_autoscalers": [
                    {"kind": "Goldilocks", "name": "v", "target": {"name": "web"}}
                ],
            },
            "t.yaml",
        )


# --------------------------------------------------------------------------- kube shell


async def test_kube_shell_leaves_a_vpa_claimed_workload_and_names_the_vpa(apiserver):
    apiserver.kube_version = (1, 34)
    rs_uid = seed_base(apiserver)
    apiserver.seed(VPA_CRD)
    apiserver.seed(vpa("web-vpa", mode="InPlaceOrRecreate"))
    live = target("web", finalizers=["foresize.io/revert"])
    live["status"] = {
        "hasEnoughDataToScale": True,
        "vertical_suggestion": {
            "uid": "s1",
            "containers": [{"name": "app", "requests": {"cpu": "600m", "memory": "256Mi"}}],
        },
    }
    apiserver.seed(live)
    for name in ("web-1", "web-2"):
        apiserver.seed(pod(name, "200m", rs_uid))
    state = base_state()
    load_state(apiserver, state)
    state.replace("VerticalPodAutoscaler", apiserver.list("VerticalPodAutoscaler"))
    api = KubeApi.from_url(apiserver.url)
    try:
        executor = KubeExecutor(api, pod_lookup=state.pod, server_version=(1, 34))
        shell = KubeShell(state, executor, clock=lambda: 1_780_000_000.0)
        await shell.run_pass()
        await shell.run_pass()
        await executor.events.flush()  # Events go out on their own task
    finally:
        await api.close()
    assert apiserver.calls("PATCH", "/resize$") == []
    conds = [
        c
        for r in apiserver.calls("PATCH", f"^{TPATH}/web/status$", code=200)
        for c in r.body.get("status", {}).get("conditions", [])
        if c["type"] == "ClaimedByAnotherAutoscaler"
    ]
    assert len(conds) == 1 and conds[0]["status"] == "True"
    assert (
        "VerticalPodAutoscaler shop/web-vpa (updateMode InPlaceOrRecreate)" in conds[0]["message"]
    )
    events = [r.body for r in apiserver.calls("POST", "^/api/v1/namespaces/shop/events$")]
    assert [e["reason"] for e in events].count("ClaimedByAnotherAutoscaler") == 1
    # The VPA is deleted: the watch drops the claim and Foresize resizes.
    state.replace("VerticalPodAutoscaler", [])
    api = KubeApi.from_url(apiserver.url)
    try:
        shell = KubeShell(
            state,
            KubeExecutor(api, pod_lookup=state.pod, server_version=(1, 34)),
            clock=lambda: 1_780_000_000.0,
        )
        await shell.run_pass()
    finally:
        await api.close()
    assert apiserver.calls("PATCH", "/resize$", code=200)


def test_selector_target_leaves_only_the_claimed_workloads_pods():
    """A selector target keeps resizing the pods no other autoscaler claims, leaves those
    of the VPA's Job alone, and names the VPA."""
    history = _history({"light": 0.05, "heavy": 0.6})
    (write,) = plan_suggestions(_snapshot(_target({"tier": "batch"})), history, NOW)
    snap = _snapshot(_target({"tier": "batch"}, dict(write.status)))
    snap.workloads["Job/batch/heavy"] = Workload("Job", "batch", "heavy", "uid-job")
    snap.vertical_claims = [
        VerticalClaim("VerticalPodAutoscaler", "batch", "heavy-vpa", "Job", "heavy", "Recreate")
    ]
    actions, _ = plan(snap, NOW, WorkerState())
    assert sorted(a.name for a in actions if isinstance(a, ResizePod)) == ["light"]
    (event,) = [
        a for a in actions if isinstance(a, EmitEvent) and a.reason == "ClaimedByAnotherAutoscaler"
    ]
    assert "VerticalPodAutoscaler batch/heavy-vpa (updateMode Recreate)" in event.message


def test_daemonset_autoscaler_leaves_a_vpa_claimed_daemonset_and_says_why():
    s = _dsa_snapshot()
    s.vertical_claims = [
        VerticalClaim("VerticalPodAutoscaler", "mon", "agent-vpa", "DaemonSet", "agent", "Auto")
    ]
    dp = plan_dsa(s, _dsa(), _sugg_all(150), 0.0)
    assert not [a for a in dp.actions if isinstance(a, ResizePod)]
    assert dp.skipped and all("mon/agent-vpa" in why for why in dp.skipped.values())
    s.vertical_claims = []
    assert [a for a in plan_dsa(s, _dsa(), _sugg_all(150), 0.0).actions if isinstance(a, ResizePod)]
