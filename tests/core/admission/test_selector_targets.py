"""Selector targets end to end on the kube path: a suggestion built from the history of
every workload whose pods the selector picks, then the selected pods resized in place."""

from __future__ import annotations

from foresize.core.api.quantity import cpu_millis
from foresize.core.cluster.actions import ResizePod
from foresize.core.recommend.suggestions import plan_suggestions
from foresize.core.vertical import WorkerState, plan
from support.selectors import NOW, _history, _snapshot, _target


def test_selector_target_gets_a_suggestion_covering_every_selected_workload() -> None:
    history = _history({"light": 0.05, "heavy": 0.6, "other": 3.0})
    (write,) = plan_suggestions(_snapshot(_target({"tier": "batch"})), history, NOW)
    (entry,) = write.status["vertical_suggestion"]["containers"]
    both = cpu_millis(entry["requests"]["cpu"])
    # Only the light pod selected: a much smaller suggestion; the heavy Job drives it up.
    (light,) = plan_suggestions(_snapshot(_target({"size": "small"})), history, NOW)
    alone = cpu_millis(light.status["vertical_suggestion"]["containers"][0]["requests"]["cpu"])
    assert alone < 200 and 600 <= both < 3000  # the unselected "other" pod does not count


def test_selector_target_pods_are_resized_in_place_from_the_suggestion() -> None:
    history = _history({"light": 0.05, "heavy": 0.6})
    (write,) = plan_suggestions(_snapshot(_target({"tier": "batch"})), history, NOW)
    status = {k: v for k, v in write.status.items()}
    target = _target({"tier": "batch"}, status)
    actions, _ = plan(_snapshot(target), NOW, WorkerState())
    resized = {a.name: a for a in actions if isinstance(a, ResizePod)}
    assert sorted(resized) == ["heavy-x7k2p", "light"]
    want = cpu_millis(write.status["vertical_suggestion"]["containers"][0]["requests"]["cpu"])
    assert {a.containers[0].requests["cpu"] for a in resized.values()} == {want}
