"""Sizing policies a simulation can run under, and the hook to add more.

A policy is a function `install(sim)` that wires itself into a fresh `SimCluster` before
the run: periodic callbacks (`sim.every`), a usage observer (`sim.on_usage`), the admission
hook (`sim.admission_hook`) or the scale hook (`sim.scale_hook`). `static` installs
nothing: requests stay as the scenario wrote them.

Other parts register theirs with `register_policy("foresize", install)` (or by adding to
`POLICIES`); `foresize simulate --policy NAME` then picks it up. Modules listed in
`POLICY_MODULES` are imported lazily so they can register themselves on import.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from foresize.core.errors import ForesizeError

if TYPE_CHECKING:
    from foresize.shells.sim.cluster import SimCluster

# What an installer returns (e.g. the simulated operator it installed) is not used.
PolicyInstaller = Callable[["SimCluster"], object]


def _static(sim: SimCluster) -> None:
    """No autoscaler: requests and limits stay as written."""


POLICIES: dict[str, PolicyInstaller] = {"static": _static}

# Modules that may register more policies when imported (missing ones are skipped).
POLICY_MODULES = (
    "foresize.shells.sim.policy_foresize",
    "foresize.shells.sim.policy_vpa",
)


def register_policy(name: str, install: PolicyInstaller) -> None:
    POLICIES[name] = install


def _load_plugins() -> None:
    for mod in POLICY_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise


def available_policies() -> list[str]:
    _load_plugins()
    return sorted(POLICIES)


def get_policy(name: str) -> PolicyInstaller:
    _load_plugins()
    try:
        return POLICIES[name]
    except KeyError:
        raise ForesizeError(
            f"--policy: unknown policy {name!r} (available: {', '.join(sorted(POLICIES))})"
        ) from None


def savings_vs(summary: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    """Requested CPU and memory saved against a baseline run (e.g. `static`), as
    fractions of the baseline, with the OOM kills and throttled time of both."""
    t, b = summary["totals"], baseline["totals"]

    def saved(key: str) -> float:
        base = b.get(key, 0.0)
        return round((base - t.get(key, 0.0)) / base, 4) if base else 0.0

    return {
        "baseline": baseline.get("policy", "static"),
        "cpu_requested_saved": saved("cpu_requested_core_hours"),
        "memory_requested_saved": saved("memory_requested_gib_hours"),
        "cpu_requested_core_hours_saved": round(
            b.get("cpu_requested_core_hours", 0.0) - t.get("cpu_requested_core_hours", 0.0), 3
        ),
        "memory_requested_gib_hours_saved": round(
            b.get("memory_requested_gib_hours", 0.0) - t.get("memory_requested_gib_hours", 0.0),
            3,
        ),
        "oom_kills": {"policy": t.get("oom_kills", 0), "baseline": b.get("oom_kills", 0)},
        "throttled_seconds": {
            "policy": t.get("throttled_seconds", 0.0),
            "baseline": b.get("throttled_seconds", 0.0),
        },
    }
