"""Per-pod usage samples -> the per-container series the recommender reads (pure, no I/O).

architecture §3.1: history is kept per container of a workload, and a recommendation is per
container and applied to every replica. Usage arrives per pod, so at every collection
step the replicas' samples of one container are folded into one value, and every shell
(the kube shell's metrics-server collector and Prometheus reader, the simulator's
operator) folds them with these functions, so a workload is sized the same way
whichever shell runs it:

- CPU: the median across the replicas. A request is what one replica needs; the maximum
  across replicas would size every pod for the busiest of n at each step (the quantile of
  the largest of n pods, growing with n), and CPU above the request is throttled, not
  fatal.
- Memory: the maximum across the replicas. An OOM kill of any replica is a failure, so
  the largest pod decides.
- The workload's total (sum over replicas and containers) is kept apart for the
  horizontal forecast (`workload_totals`).

Non-finite values (a container without a reading) take no part.
"""

from __future__ import annotations

import numpy as np

CPU_ACROSS_PODS = "median"
MEMORY_ACROSS_PODS = "max"


def _finite(groups: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    groups = np.asarray(groups, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    if groups.shape != values.shape:
        raise ValueError(f"groups {groups.shape} and values {values.shape} differ in shape")
    keep = np.isfinite(values)
    return groups[keep], values[keep]


def group_median(groups: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted group ids, median of each group's finite values); vectorised."""
    g, v = _finite(groups, values)
    if g.size == 0:
        return g, v
    order = np.lexsort((v, g))
    g, v = g[order], v[order]
    ids, start, count = np.unique(g, return_index=True, return_counts=True)
    lo = v[start + (count - 1) // 2]
    hi = v[start + count // 2]
    return ids, (lo + hi) / 2.0


def group_max(groups: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted group ids, maximum of each group's finite values); vectorised."""
    g, v = _finite(groups, values)
    if g.size == 0:
        return g, v
    ids, inverse = np.unique(g, return_inverse=True)
    best = np.full(ids.size, -np.inf)
    np.maximum.at(best, inverse, v)
    return ids, best


def per_container(
    groups: np.ndarray, cpu: np.ndarray, memory: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One collection step: per-pod samples of containers (`groups[i]` = the id of the
    workload container sample i belongs to) -> (ids, cpu, memory), one value per id:
    CPU the median across its pods, memory the maximum (NaN where it has no reading)."""
    cid, cval = group_median(groups, cpu)
    mid, mval = group_max(groups, memory)
    ids = np.union1d(cid, mid)
    out_cpu = np.full(ids.size, np.nan)
    out_mem = np.full(ids.size, np.nan)
    out_cpu[np.searchsorted(ids, cid)] = cval
    out_mem[np.searchsorted(ids, mid)] = mval
    return ids, out_cpu, out_mem


def workload_totals(
    groups: np.ndarray, cpu: np.ndarray, memory: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One collection step: (ids, summed cpu, summed memory) per group (e.g. per workload,
    over its pods and containers): what the horizontal forecast reads."""
    g = np.asarray(groups, dtype=np.int64)
    ids, inverse = np.unique(g, return_inverse=True)
    c = np.nan_to_num(np.asarray(cpu, dtype=np.float64), nan=0.0)
    m = np.nan_to_num(np.asarray(memory, dtype=np.float64), nan=0.0)
    return (
        ids,
        np.bincount(inverse, weights=c, minlength=ids.size),
        np.bincount(inverse, weights=m, minlength=ids.size),
    )


class Grouping:
    """`per_container` and `workload_totals` for one fixed assignment of samples to groups,
    worked out once: a collector whose pods stay the same from step to step (the simulated
    operator between pod starts and stops) folds each step with a few vector operations
    instead of sorting and de-duplicating the group ids again. Same results as the free
    functions; a step with a non-finite value goes through them."""

    def __init__(self, groups: np.ndarray) -> None:
        self.groups = np.asarray(groups, dtype=np.int64)
        self.ids, inverse, counts = np.unique(self.groups, return_inverse=True, return_counts=True)
        self.inverse = inverse.reshape(-1)
        self.counts = counts
        # Row i of the padded matrix holds group i's samples; the padding sorts last.
        order = np.argsort(self.inverse, kind="stable")
        self.rows = self.inverse[order]
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        self.cols = np.arange(order.size) - starts[self.rows]
        self.order = order
        self.width = int(counts.max()) if counts.size else 0
        self.lo = (counts - 1) // 2
        self.hi = counts // 2
        self.at = np.arange(self.ids.size)

    def _matrix(self, values: np.ndarray, pad: float) -> np.ndarray:
        m = np.full((self.ids.size, self.width), pad)
        m[self.rows, self.cols] = values[self.order]
        return m

    def per_container(
        self, cpu: np.ndarray, memory: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`per_container(self.groups, cpu, memory)`."""
        cpu = np.asarray(cpu, dtype=np.float64)
        memory = np.asarray(memory, dtype=np.float64)
        if self.groups.size == 0 or not (np.isfinite(cpu).all() and np.isfinite(memory).all()):
            return per_container(self.groups, cpu, memory)
        ranked = np.sort(self._matrix(cpu, np.inf), axis=1)
        median = (ranked[self.at, self.lo] + ranked[self.at, self.hi]) / 2.0
        peak = self._matrix(memory, -np.inf).max(axis=1)
        return self.ids, median, peak

    def totals(
        self, cpu: np.ndarray, memory: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`workload_totals(self.groups, cpu, memory)`."""
        c = np.asarray(cpu, dtype=np.float64)
        m = np.asarray(memory, dtype=np.float64)
        if not (np.isfinite(c).all() and np.isfinite(m).all()):
            return workload_totals(self.groups, c, m)
        return (
            self.ids,
            np.bincount(self.inverse, weights=c, minlength=self.ids.size),
            np.bincount(self.inverse, weights=m, minlength=self.ids.size),
        )
