"""Target status writes in the simulated API server follow JSON merge patch (RFC 7386),
as the real one does: a null removes its key at any depth, including inside an object
the patch creates, and what is stored does not alias the writer's dicts."""

from __future__ import annotations

import itertools

from foresize.core.cluster.actions import WriteTargetStatus
from foresize.core.vertical.state import TargetState
from support.sim import make_sim, workload

KEY = ("AIScaleTarget", "default", "web")


def write(sim, status: dict) -> dict:
    assert sim.apply(WriteTargetStatus("default", "web", status)).ok
    return sim.target_status[KEY]


def test_null_inside_a_newly_added_object_removes_the_key():
    sim = make_sim([workload("web")], settle=0)
    status = write(sim, {"disruption": {"stalls": None, "counters": {"resized": 1, "x": None}}})
    assert status == {"disruption": {"counters": {"resized": 1}}}
    # Replacing a scalar by an object merges into {} too (nulls dropped there as well).
    write(sim, {"phase": "Ready"})
    status = write(sim, {"phase": {"value": "x", "gone": None}})
    assert status["phase"] == {"value": "x"}


def test_merge_into_an_existing_object_and_removal():
    sim = make_sim([workload("web")], settle=0)
    write(sim, {"lifecycle": {"observed_mode": "autonomous", "reverting": {"reason": "a"}}})
    status = write(sim, {"lifecycle": {"reverting": None, "observed_mode": "observe"}})
    assert status == {"lifecycle": {"observed_mode": "observe"}}
    status = write(sim, {"lifecycle": None})
    assert status == {}


def test_stored_status_does_not_alias_the_patch():
    sim = make_sim([workload("web")], settle=0)
    patch = {"revert": {"pods_left": {"p": "why"}}, "notes": ["a"]}
    write(sim, patch)
    patch["revert"]["pods_left"]["q"] = "later"
    patch["notes"].append("b")
    assert sim.target_status[KEY] == {"revert": {"pods_left": {"p": "why"}}, "notes": ["a"]}


def test_vertical_worker_state_written_fresh_has_no_nulls_and_reads_back():
    # The worker writes empty collections as null so that a merge patch removes them; the
    # first write creates status.disruption and must not keep those nulls.
    sim = make_sim([workload("web")], settle=0)
    state = TargetState()
    state.resized = 2
    status = write(sim, {"disruption": state.to_status()})

    def nulls(obj) -> list:
        if isinstance(obj, dict):
            return [k for k, v in obj.items() if v is None] + [
                n for v in obj.values() for n in nulls(v)
            ]
        if isinstance(obj, list):
            return [n for v in obj for n in nulls(v)]
        return []

    assert nulls(status) == []
    assert TargetState.from_status(status["disruption"]).resized == 2


def test_operator_hands_out_a_new_resource_version_with_each_status_write():
    """As the API server does: the target object carrying a written status is a new object
    with a new resourceVersion (the planners' memo of target views is keyed by it), and
    what it reads is what was written."""
    from foresize.core.cluster.target import target_view
    from foresize.shells.sim.operator import OperatorOptions, SimOperator
    from foresize.shells.sim.recommenders import FixedRecommender

    sim = make_sim([workload("web", 2)], settle=0)
    op = SimOperator(
        sim,
        FixedRecommender({"*": (20.0, 20 * 2**20)}),
        OperatorOptions(admission=False, min_lookback=0.0, recommend_interval=60.0),
    ).install()
    first = op.targets["default/web"]
    versions = [first.metadata.resourceVersion]
    for _ in range(6):
        sim.run(300)
        versions.append(op.targets["default/web"].metadata.resourceVersion)
    changed = [b for a, b in itertools.pairwise(versions) if a != b]
    assert changed, "status was written: the object must have a new version"
    assert len(set(versions)) == len(changed) + 1  # never an old version handed out again
    now = op.targets["default/web"]
    assert now is not first and now.metadata.uid == first.metadata.uid
    written = sim.target_status[KEY]
    assert target_view(now).vertical_mode == "autonomous"
    assert now.status.model_dump(mode="json")["pods_resized"] == written["pods_resized"]
