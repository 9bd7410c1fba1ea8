"""Object names as the API server checks them, so that offline checks (`foresize
validate`, scenario files, the strict test API server) refuse what a cluster would.

Most objects, custom resources included, are named by an RFC 1123 subdomain; namespaces
and Services by an RFC 1123 label (it becomes one DNS label of their address).
"""

from __future__ import annotations

import re

DNS1123_LABEL_MAX = 63  # one DNS label (RFC 1035 section 2.3.4)
DNS1123_SUBDOMAIN_MAX = 253  # a whole DNS name, as apimachinery's IsDNS1123Subdomain

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _name_error(value: str, limit: int, pattern: re.Pattern[str], shape: str) -> str | None:
    problems = []
    if len(value) > limit:
        problems.append(f"must be no more than {limit} characters")
    if not pattern.fullmatch(value):
        problems.append(shape)
    return "; ".join(problems) or None


def dns_label_error(value: str) -> str | None:
    """Why `value` is not an RFC 1123 label (a namespace, a Service), or None."""
    return _name_error(
        value,
        DNS1123_LABEL_MAX,
        _LABEL,
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
        "or '-', and must start and end with an alphanumeric character",
    )


def dns_subdomain_error(value: str) -> str | None:
    """Why `value` is not an RFC 1123 subdomain (most object names), or None."""
    return _name_error(
        value,
        DNS1123_SUBDOMAIN_MAX,
        _SUBDOMAIN,
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
        "characters, '-' or '.', and must start and end with an alphanumeric character",
    )
