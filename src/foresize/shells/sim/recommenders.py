"""The recommenders the simulated operator runs (`foresize.shells.sim.operator`):
`ForesizeRecommender` (Foresize itself: the history the pass's recommender reads), and the
baselines, whose suggestions replace the pass's own: `VPARecommender` (the VPA reference
of architecture §3.7) and `FixedRecommender` (fixed requests, tests).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from foresize.adapters.history.aggregate import Grouping
from foresize.adapters.history.memory import UsageHistory
from foresize.core.api.quantity import MIB
from foresize.core.history import OOM, TOTAL_CONTAINER, SeriesKey


class Recommender(Protocol):
    """What the operator needs from a recommender (amounts canonical: millicores, bytes)."""

    def observe(
        self,
        now: float,
        series: np.ndarray,
        cpu_m: np.ndarray,
        mem: np.ndarray,
        slots: np.ndarray | None = None,
    ) -> None: ...

    def recommend(self, now: float, series: list[int]) -> dict[int, tuple[float, float]]: ...

    def on_oom(self, now: float, series: int, request: float, usage: float) -> None: ...


@dataclass(slots=True)
class SeriesInfo:
    namespace: str
    workload: str  # Kind/name
    container: str
    first_seen: float


class FixedRecommender:
    """Fixed requests per container name ("*" for any): tests and hand-made sizings."""

    def __init__(self, requests: dict[str, tuple[float, float]]) -> None:
        self.requests = dict(requests)
        self.names: dict[int, str] = {}

    def observe(
        self,
        now: float,
        series: np.ndarray,
        cpu_m: np.ndarray,
        mem: np.ndarray,
        slots: np.ndarray | None = None,
    ) -> None:
        return None

    def recommend(self, now: float, series: list[int]) -> dict[int, tuple[float, float]]:
        out = {}
        for s in series:
            name = self.names.get(s, "")
            value = self.requests.get(name, self.requests.get("*"))
            if value is not None:
                out[s] = value
        return out

    def on_oom(self, now: float, series: int, request: float, usage: float) -> None:
        return None


# --------------------------------------------------------------------------- VPA reference


class VPARecommender:
    """The Kubernetes VPA recommender with its documented defaults (architecture §3.7):
    decaying histograms (24 h half-life, buckets 5% apart); target = p90 x 1.15; memory
    from daily peaks (8 days); OOM bump to max(usage + 100 MiB, usage x 1.2); minimums
    25 millicores / 250 MiB. (Its 10% change threshold is the operator's hysteresis.)"""

    HALF_LIFE = 86400.0
    RATIO = 1.05
    CPU_FIRST = 1.0  # millicores: the first bucket starts here
    MEM_FIRST = 1.0 * MIB
    N_BUCKETS = 300  # 1.05**300 ~ 2.3e6: 1m .. 2300 cores, 1Mi .. 2.2Ti
    MARGIN = 1.15
    PERCENTILE = 0.9
    MIN_CPU = 25.0
    MIN_MEM = 250.0 * MIB
    MEMORY_WINDOW_DAYS = 8
    DAY = 86400.0

    def __init__(self, capacity: int = 64) -> None:
        self.cpu_hist = np.zeros((capacity, self.N_BUCKETS))
        # Completed days: (day, per-series peak); the last MEMORY_WINDOW_DAYS are kept.
        self.mem_days: list[tuple[int, np.ndarray]] = []
        self.day_peak = np.zeros(capacity)
        self.day = 0
        self.oom_floor = np.zeros(capacity)
        self.seen = np.zeros(capacity, dtype=bool)

    def _grow(self, n: int) -> None:
        cap = self.cpu_hist.shape[0]
        if n <= cap:
            return
        new = max(n, cap * 2)
        hist = np.zeros((new, self.N_BUCKETS))
        hist[:cap] = self.cpu_hist
        self.cpu_hist = hist
        for name in ("day_peak", "oom_floor", "seen"):
            old = getattr(self, name)
            arr = np.zeros(new, dtype=old.dtype)
            arr[:cap] = old
            setattr(self, name, arr)

    def _bucket(self, v: np.ndarray, first: float) -> np.ndarray:
        b = np.floor(np.log(np.maximum(v, first) / first) / math.log(self.RATIO))
        return np.clip(b.astype(np.int64), 0, self.N_BUCKETS - 1)

    def _weight(self, t: float) -> float:
        # Weights grow as 2^(t / half-life) (VPA's reference-time trick): older samples
        # count relatively less without touching the stored histogram.
        return 2.0 ** (t / self.HALF_LIFE)

    def observe(
        self,
        now: float,
        series: np.ndarray,
        cpu_m: np.ndarray,
        mem: np.ndarray,
        slots: np.ndarray | None = None,
    ) -> None:
        # VPA pools every pod's samples in one histogram per container: `slots` unused.
        if series.size == 0:
            return
        self._grow(int(series.max()) + 1)
        day = int(now // self.DAY)
        if day != self.day:
            self.mem_days.append((self.day, self.day_peak.copy()))
            self.mem_days = self.mem_days[-self.MEMORY_WINDOW_DAYS :]
            self.day_peak = np.zeros_like(self.day_peak)
            self.day = day
        np.add.at(self.cpu_hist, (series, self._bucket(cpu_m, self.CPU_FIRST)), self._weight(now))
        np.maximum.at(self.day_peak, series, mem)
        self.seen[series] = True

    def _percentile(self, hist: np.ndarray, first: float) -> np.ndarray:
        total = hist.sum(axis=1)
        cum = np.cumsum(hist, axis=1)
        idx = np.clip((cum < (self.PERCENTILE * total)[:, None]).sum(axis=1), 0, self.N_BUCKETS - 1)
        # The bucket's end (start of the next one), as VPA reports it.
        return np.where(total > 0, first * self.RATIO ** (idx + 1), np.nan)

    def _memory_hist(self) -> np.ndarray:
        n = self.day_peak.size
        hist = np.zeros((n, self.N_BUCKETS))
        rows = np.arange(n)
        for day, peaks in [*self.mem_days, (self.day, self.day_peak)]:
            p = np.zeros(n)
            p[: peaks.size] = peaks[:n]
            has = p > 0
            if has.any():
                np.add.at(
                    hist,
                    (rows[has], self._bucket(p[has], self.MEM_FIRST)),
                    self._weight(day * self.DAY),
                )
        return hist

    def recommend(self, now: float, series: list[int]) -> dict[int, tuple[float, float]]:
        if not series:
            return {}
        self._grow(max(series) + 1)
        cpu = np.fmax(self._percentile(self.cpu_hist, self.CPU_FIRST) * self.MARGIN, self.MIN_CPU)
        mem = self._percentile(self._memory_hist(), self.MEM_FIRST) * self.MARGIN
        mem = np.fmax(np.fmax(mem, self.MIN_MEM), self.oom_floor)
        return {s: (float(cpu[s]), float(mem[s])) for s in series if self.seen[s]}

    def on_oom(self, now: float, series: int, request: float, usage: float) -> None:
        self._grow(series + 1)
        bump = max(usage + 100 * MIB, usage * 1.2)
        self.oom_floor[series] = max(self.oom_floor[series], bump)


# --------------------------------------------------------------------------- Foresize


class ForesizeRecommender:
    """Foresize's recommender on the simulator: the usage history the core pass reads.

    The recommendation itself is the core's (`foresize.core.reconcile.plan_pass` ->
    `recommend.suggestions.plan_suggestions` -> `recommend.target.recommend_batch`), the
    very function the kube shell runs; this class only holds the history that pass reads,
    an in-memory `UsageHistory` (the operator's default store), filled the way the kube
    shell's collector fills it: per workload container (architecture §3.1), each step's
    replicas folded by `foresize.adapters.history.aggregate.per_container` (CPU the median across
    replicas, memory the maximum), the workload's total under `TOTAL_CONTAINER` (what the
    horizontal forecast reads), and OOM kills as history events.

    `mode` (the `foresize:MODE` policies) sets the recommendation mode of the simulated
    targets (`spec.model.mode`), instead of each target's default.
    """

    def __init__(self, mode: str | None = None, step: float = 60.0) -> None:
        self.mode = mode
        self.history = UsageHistory(step=step)

    def observe_samples(
        self, now: float, keys: list[SeriesKey], cpu_cores: np.ndarray, mem: np.ndarray
    ) -> None:
        """One step's per-pod samples (`keys[i]` = the workload container of sample i)."""
        if not keys:
            return
        containers, totals = self.groupings(keys)
        self.observe_grouped(now, containers, totals, cpu_cores, mem)

    def groupings(self, keys: list[SeriesKey]) -> tuple[Grouping, Grouping]:
        """How samples keyed `keys` fold into history columns: per workload container, and
        per workload total (columns registered on first use)."""
        totals = [k.of_container(TOTAL_CONTAINER) for k in keys]
        return Grouping(self.history.indices(keys)), Grouping(self.history.indices(totals))

    def observe_grouped(
        self,
        now: float,
        containers: Grouping,
        totals: Grouping,
        cpu_cores: np.ndarray,
        mem: np.ndarray,
    ) -> None:
        """`observe_samples` with the samples' groupings worked out before (`groupings`):
        the replicas folded per container (`history.aggregate`), and the workload totals."""
        ids, cpu, memory = containers.per_container(cpu_cores, mem)
        self.history.append(now, ids, cpu=cpu, memory=memory)
        tids, tcpu, tmem = totals.totals(cpu_cores, mem)
        self.history.append(now, tids, cpu=tcpu, memory=tmem)

    def record_oom(self, key: SeriesKey, when: float, usage: float) -> None:
        self.history.record_event(key, OOM, when, usage)
