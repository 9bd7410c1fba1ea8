"""One label-selector rule (`api.selectors`) behind every selector Foresize reads: the API
type, the target read-model, the vertical policy and the snapshot's matchLabels lookup."""

from __future__ import annotations

import pytest

from foresize.core.api.selectors import selector_matches
from foresize.core.api.types import LabelSelector
from foresize.core.cluster.snapshot import labels_match

POD = {"app": "web", "tier": "front"}


@pytest.mark.parametrize(
    ("match_labels", "expressions", "expected"),
    [
        ({}, [], False),  # empty selects nothing, never everything
        ({"app": "web"}, [], True),
        ({"app": "api"}, [], False),
        ({}, [("tier", "In", ["front", "back"])], True),
        ({}, [("tier", "In", ["back"])], False),
        ({}, [("tier", "NotIn", ["front"])], False),
        ({}, [("zone", "NotIn", ["a"])], True),
        ({}, [("app", "Exists", [])], True),
        ({}, [("zone", "Exists", [])], False),
        ({}, [("zone", "DoesNotExist", [])], True),
        ({"app": "web"}, [("app", "DoesNotExist", [])], False),
    ],
)
def test_selector_rule_and_its_users_agree(match_labels, expressions, expected) -> None:
    assert selector_matches(match_labels, expressions, POD) is expected
    api = LabelSelector.model_validate(
        {
            "matchLabels": match_labels,
            "matchExpressions": [
                {"key": k, "operator": op, **({"values": v} if v else {})}
                for k, op, v in expressions
            ],
        }
    )
    assert api.matches(POD) is expected
    if not expressions:
        assert labels_match(match_labels, POD) is expected
