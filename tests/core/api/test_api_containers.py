"""The one rule for which per-container entry applies, and its readers agreeing on it."""

from __future__ import annotations

from foresize.core.api.containers import entry_for
from foresize.core.api.types import AIScaleTarget
from foresize.core.cluster.target import target_view
from foresize.core.recommend.params import RecommendParams


class _Entry:
    def __init__(self, name: str, tag: str) -> None:
        self.name = name
        self.tag = tag


def test_an_exact_name_wins_over_a_wildcard_listed_before_it() -> None:
    entries = [_Entry("*", "any"), _Entry("app", "own")]
    assert entry_for(entries, "app").tag == "own"  # type: ignore[union-attr]
    assert entry_for(entries, "sidecar").tag == "any"  # type: ignore[union-attr]
    assert entry_for([_Entry("app", "own")], "sidecar") is None


def _target() -> AIScaleTarget:
    return AIScaleTarget.model_validate(
        {
            "apiVersion": "foresize.io/v1",
            "kind": "AIScaleTarget",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "vertical": {
                    "mode": "autonomous",
                    "containers": [
                        {"name": "*", "cpu": {"lowerbound": "10m"}},
                        {"name": "app", "cpu": {"lowerbound": "500m"}},
                    ],
                },
            },
        }
    )


def test_the_read_model_and_the_recommender_pick_the_same_entry() -> None:
    target = _target()
    view = target_view(target)
    params = RecommendParams.from_target(target)
    for container, expected in (("app", "app"), ("sidecar", "*")):
        policy = view.policy_for(container)
        assert policy is not None and policy.name == expected
        assert params.bounds(container).name == expected
