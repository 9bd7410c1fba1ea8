"""Kubernetes label-selector matching: the one rule every selector in Foresize uses.

`matchLabels` and `matchExpressions` (`In`, `NotIn`, `Exists`, `DoesNotExist`) must all
hold. An empty selector selects nothing here, unlike a Kubernetes `{}` selector: Foresize
never wants every pod of a namespace by accident (a target, a PDB lookup, an exclusion).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

Expression = tuple[str, str, Iterable[str]]
"""One matchExpressions entry: (key, operator, values)."""


def selector_matches(
    match_labels: Mapping[str, str],
    expressions: Iterable[Expression],
    labels: Mapping[str, str],
) -> bool:
    """Whether `labels` satisfy the selector (empty selector: False)."""
    expressions = list(expressions)
    if not match_labels and not expressions:
        return False
    if any(labels.get(k) != v for k, v in match_labels.items()):
        return False
    for key, op, values in expressions:
        present = key in labels
        if op == "In" and (not present or labels[key] not in set(values)):
            return False
        if op == "NotIn" and present and labels[key] in set(values):
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True
