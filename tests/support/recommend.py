"""Builders shared by the tests (moved out of test_recommend.py)."""

from __future__ import annotations

import numpy as np

from foresize.core.cluster.model import Container, ResourceRequirements
from foresize.core.cluster.qos import qos_class_of
from foresize.core.recommend.histories import ContainerHistory

NOW = 1_700_006_400.0 + 10 * 86400.0


DAY_POINTS = 288


GIB = 2**30


def flat_history(cpu=0.5, mem=1 * GIB, days=3, noise=0.0, seed=0, **kw) -> ContainerHistory:
    rng = np.random.default_rng(seed)
    n = days * DAY_POINTS
    c = cpu * (1 + noise * rng.standard_normal(n))
    m = mem * (1 + noise * rng.standard_normal(n))
    return ContainerHistory(c, m, first_seen=NOW - days * 86400.0, **kw)


def res(cpu=None, mem=None, lcpu=None, lmem=None) -> ResourceRequirements:
    r = ResourceRequirements()
    if cpu is not None:
        r.requests["cpu"] = cpu
    if mem is not None:
        r.requests["memory"] = mem
    if lcpu is not None:
        r.limits["cpu"] = lcpu
    if lmem is not None:
        r.limits["memory"] = lmem
    return r


def qos(rr: dict[str, ResourceRequirements]) -> str:
    return qos_class_of(Container(n, r) for n, r in rr.items())


def suggested(s) -> dict[str, ResourceRequirements]:
    return {
        n: ResourceRequirements(dict(c.requests), dict(c.limits)) for n, c in s.containers.items()
    }
