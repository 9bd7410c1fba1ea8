"""Label keys and values: the one validator (Kubernetes' rules), used by the API models
(`foresize validate`, the CRD loader, the `--state` file), the validating webhook and
scenario files, so a selector the API server would never match is refused alike.

- value: empty, or at most 63 characters of `[A-Za-z0-9._-]` starting and ending with an
  alphanumeric;
- key: `[prefix/]name`: name as a non-empty value; prefix a DNS subdomain (lowercase
  alphanumerics, `-` and `.`, at most 253 characters).

Lengths are checked before any pattern, and the patterns cannot backtrack beyond one pass.
"""

from __future__ import annotations

import re

from foresize.core.api.duration import shown

MAX_VALUE_LENGTH = 63
MAX_PREFIX_LENGTH = 253
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME_RULE = "alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"


def label_value_error(value: object) -> str | None:
    """Why `value` is not a label value; None if it is one."""
    if not isinstance(value, str):
        return f"label value must be a string, not {shown(value)}"
    if value == "":
        return None
    if len(value) > MAX_VALUE_LENGTH:
        return f"label value is {len(value)} characters (at most {MAX_VALUE_LENGTH})"
    if not _NAME.fullmatch(value):
        return f"label value {shown(value)} must be {_NAME_RULE}"
    return None


def label_key_error(key: object) -> str | None:
    """Why `key` is not a label key; None if it is one."""
    if not isinstance(key, str):
        return f"label key must be a string, not {shown(key)}"
    if len(key) > MAX_PREFIX_LENGTH + 1 + MAX_VALUE_LENGTH:
        return f"label key is {len(key)} characters long"
    prefix, slash, name = key.rpartition("/")
    bad_prefix = not prefix or len(prefix) > MAX_PREFIX_LENGTH or not _PREFIX.fullmatch(prefix)
    if slash and bad_prefix:
        return f"label key prefix {shown(prefix)} must be a DNS subdomain"
    if not name:
        return f"label key {shown(key)} has an empty name"
    if len(name) > MAX_VALUE_LENGTH:
        return f"label key name is {len(name)} characters (at most {MAX_VALUE_LENGTH})"
    if not _NAME.fullmatch(name):
        return f"label key {shown(key)} must be {_NAME_RULE}"
    return None


def label_map_errors(labels: object) -> list[str]:
    """Every problem with a `{key: value}` label map (or matchLabels)."""
    if not isinstance(labels, dict):
        return [f"must be a map of labels, not {shown(labels)}"]
    problems = []
    for key, value in labels.items():
        problem = label_key_error(key) or label_value_error(value)
        if problem:
            problems.append(problem)
    return problems


def check_label_map(labels: dict[str, str]) -> dict[str, str]:
    """`labels` unchanged if valid; ValueError naming the first problem (pydantic)."""
    problems = label_map_errors(labels)
    if problems:
        raise ValueError(problems[0])
    return labels


def check_label_key(key: str) -> str:
    problem = label_key_error(key)
    if problem:
        raise ValueError(problem)
    return key


def check_label_value(value: str) -> str:
    problem = label_value_error(value)
    if problem:
        raise ValueError(problem)
    return value
