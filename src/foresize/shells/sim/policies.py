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
from typing import TYPE_CHECKING

from foresize.core.errors import ForesizeError

if TYPE_CHECKING:
    from foresize.shells.sim.cluster import SimCluster

# What an installer returns (e.g. the simulated operator it installed) is not used.
PolicyInstaller = Callable[["SimCluster"], object]


def _static(sim: SimCluster) -> None:
    """No autoscaler: requests and limits stay as written."""


POLICIES: dict[str, PolicyInstaller] = {"static": _static}

# Modules that may register more policies when imported (missing ones are skipped).
POLICY_MODULES = ("foresize.shells.sim.policy_foresize", "foresize.shells.sim.policy_vpa")


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
