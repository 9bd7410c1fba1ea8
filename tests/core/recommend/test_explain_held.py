"""`recommend.explain.held_steps`: what a maintenance window or a budget held back becomes
a last step of each resource it would have moved, its value the request written."""

from __future__ import annotations

import pytest

from foresize.core.errors import ForesizeError
from foresize.core.recommend.explain import explain_status

STATUS = {
    "vertical_suggestion": {
        "uid": "s1",
        "containers": [
            {"name": "api", "requests": {"cpu": "300m", "memory": "512Mi"}},
            {"name": "sidecar", "requests": {"cpu": "20m", "memory": "64Mi"}},
        ],
    },
    "explanation": {
        "containers": [
            {
                "name": "api",
                "steps": [
                    {"step": "round", "resource": "cpu", "value": 300, "why": "to 1m"},
                    {"step": "round", "resource": "memory", "value": 536870912, "why": "to 1Mi"},
                ],
            },
            {"name": "sidecar", "steps": []},
        ]
    },
    "held_back": [
        {
            "rule": "maintenance_window",
            "message": "eviction held: outside every maintenance window; windows[0] opens"
            " next at 2026-07-02T01:00:00Z",
            "pods": ["api-1", "api-2", "api-3", "api-4"],
            "containers": [{"name": "api", "resources": ["memory"]}],
            "until": "2026-07-02T01:00:00Z",
        }
    ],
}


def test_a_held_change_is_the_last_step_of_the_resource_it_moves() -> None:
    doc = explain_status(STATUS, "shop/api")
    api = doc["containers"]["api"]
    memory = [s for s in api["steps"] if s["resource"] == "memory"]
    assert memory[-1] == {
        "step": "maintenance_window",
        "resource": "memory",
        "value": 536870912,
        "why": "not on pod(s) api-1, api-2, api-3 and 1 more yet: eviction held: outside every"
        " maintenance window; windows[0] opens next at 2026-07-02T01:00:00Z",
    }
    assert memory[-1]["value"] == api["request"]["memory"]  # the chain ends on the request
    cpu = [s for s in api["steps"] if s["resource"] == "cpu"]
    assert [s["step"] for s in cpu] == ["round"]  # cpu was not held
    assert doc["containers"]["sidecar"]["steps"] == []


def test_budget_holds_and_odd_entries() -> None:
    status = {
        **STATUS,
        "held_back": [
            "not a map",
            {
                "rule": "change_budget",
                "message": "new size held",
                "pods": ["a"],
                "containers": [
                    {"name": "gone", "resources": ["cpu"]},
                    {"name": "sidecar", "resources": ["cpu", "gpu"]},
                ],
            },
        ],
    }
    doc = explain_status(status, "shop/api", "sidecar")
    (step,) = doc["containers"]["sidecar"]["steps"]
    assert step["step"] == "change_budget" and step["value"] == 20
    assert step["why"] == "not on pod(s) a yet: new size held"


def test_nothing_held_adds_nothing() -> None:
    doc = explain_status({**STATUS, "held_back": None}, "shop/api")
    assert [s["step"] for s in doc["containers"]["api"]["steps"]] == ["round", "round"]
    with pytest.raises(ForesizeError, match="container 'web' not in the suggestion"):
        explain_status(STATUS, "shop/api", "web")
