"""/metrics after a simulated run: the sim shell's operator records every (action, result)
it applied; the same ChangeRecorder the kube shell uses turns them into the metrics, and
the sim's own event log says what really happened, so the counters can be checked
against it."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from foresize.adapters.telemetry.metrics import METRIC_NAMES, ForesizeMetrics
from foresize.adapters.telemetry.recorder import ChangeRecorder
from foresize.core.api.quantity import GIB, MIB
from support.sim import make_sim, operator, suggest, workload


def scrape(metrics: ForesizeMetrics) -> dict[tuple[str, tuple], float]:
    text = metrics.exposition().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


def test_metrics_after_simulated_resizes_and_pdb_refusals():
    metrics = ForesizeMetrics()
    recorder = ChangeRecorder(metrics)

    # Run 1: in-place upsizes of a 2-replica Deployment.
    sim = make_sim([workload("a", 2)], nodes=2)
    op = operator(
        sim, "in_place", targets=["Deployment/default/a"], disruption={"max_disrupted": 2}
    )
    op.record_actions = True
    suggest(op, "a", app=({"cpu": 800, "memory": 768 * MIB}, {"cpu": 1000, "memory": GIB}))
    before = sim.snapshot()
    sim.run(300)
    pairs = [(a, r) for _, a, r in op.applied]
    events = recorder.record(pairs, before)
    recorder.observe(sim.snapshot())
    # The simulated API server logs each accepted resize request ("ResizeRequested").
    resized_in_sim = len(sim.events.query("ResizeRequested"))

    # Run 2: evictions refused by a PodDisruptionBudget (429).
    sim2 = make_sim(
        [workload("p", 3)],
        nodes=2,
        pdbs=[{"name": "p", "namespace": "default", "selector": {"app": "p"}, "min_available": 3}],
    )
    op2 = operator(
        sim2, "recreate", disruption={"max_disrupted": 3}, targets=["Deployment/default/p"]
    )
    op2.record_actions = True
    suggest(op2, "p", app=({"cpu": 500, "memory": 256 * MIB}, {"cpu": 1000, "memory": GIB}))
    sim2.run(200)
    pairs2 = [(a, r) for _, a, r in op2.applied]
    recorder.record(pairs2, sim2.snapshot())
    recorder.observe(sim2.snapshot())

    got = scrape(metrics)
    names = {f.name for f in text_string_to_metric_families(metrics.exposition().decode())}
    assert {n.removesuffix("_total") for n in METRIC_NAMES} <= names
    ok_resizes = [a for a, r in pairs if type(a).__name__ == "ResizePod" and r.ok]
    assert len(ok_resizes) == 2 == resized_in_sim
    up = (
        "foresize_resizes_total",
        (("direction", "up"), ("outcome", "success"), ("resource", "cpu"), ("target", "default/a")),
    )
    assert got[up] == 2
    assert [e.reason for e in events if e.kind == "Pod"].count("Resized") == 2
    refusals = [r for a, r in pairs2 if type(a).__name__ == "EvictPod" and r.code == 429]
    assert refusals and len(refusals) == len(sim2.events.query("EvictionRefused"))
    deferred = ("foresize_evictions_total", (("outcome", "deferred"), ("target", "default/p")))
    assert got[deferred] == len(refusals)
    # Every node of the simulated cluster has a charge-gap sample.
    gaps = [k for k in got if k[0] == "foresize_node_charge_gap"]
    assert {dict(k[1])["node"] for k in gaps} >= {"n-0", "n-1"}
