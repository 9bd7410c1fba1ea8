"""The recommendation-quality replay of architecture §3.7 (pure: arrays in, numbers out).

Replay, identical for every policy:
- every series is resampled to a 5-minute grid by the maximum within each bucket; empty
  buckets stay gaps (not interpolated, not scored);
- a policy sees all history up to the current sample and decides every 15 minutes (after
  samples 2, 5, 8, ... of the grid); a decision applies from the next sample on;
- memory above the memory request is an OOM kill (limit = request for scoring). Every
  sample above the request is one kill (the container restarts, so a continuing excess
  kills it again). The policy is told at once and may react at that sample; its reaction
  applies from the next sample;
- the first 7 days of each series are warm-up: decisions are made, nothing is scored;
- a change smaller than the policy's own hysteresis is not made; every applied change in
  the scored period counts.

Metrics per resource over all series (sums over scored samples, then ratios): slack,
shortfall, under, events per series-day (CPU: upward crossings of usage over request;
memory: OOM kills), changes per series-day.

Requests are compared in canonical units rounded up (CPU 1m, memory 1Mi) for every policy.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from foresize.core.api.hysteresis import Threshold
from foresize.core.api.quantity import CPU, MEMORY, MIB
from foresize.core.cluster.model import ResourceRequirements
from foresize.core.forecast.select import OnlineScores
from foresize.core.history import TraceSeries, resample_max
from foresize.core.recommend.core import (
    passes_hysteresis,
    round_up,
)
from foresize.core.recommend.histories import HISTORY_WINDOW, TO_CANONICAL, ContainerHistory
from foresize.core.recommend.oom import OOMState
from foresize.core.recommend.params import RecommendParams, ResourceModel
from foresize.core.recommend.request import CachedSchedule, TargetRequest
from foresize.core.recommend.score import ResourceScore, last_sample, score_resource
from foresize.core.recommend.target import recommend_batch

STEP = 300.0
DECISION_EVERY = 3  # 15 minutes
WARMUP = 7 * 86400.0


@dataclass(slots=True)
class ReplayData:
    """Series on a common 5-minute grid. CPU in millicores, memory in bytes (NaN = gap)."""

    start: float
    cpu: np.ndarray  # (S, T)
    memory: np.ndarray | None  # (S, T)
    cpu_capacity: np.ndarray | None  # (S, T) manual sizing, millicores
    memory_capacity: np.ndarray | None
    first: np.ndarray  # (S,) first column with any data
    names: list[str] = field(default_factory=list)

    @property
    def shape(self) -> tuple[int, int]:
        s, t = self.cpu.shape
        return s, t

    def usage(self, resource: str) -> np.ndarray:
        """The usage matrix of `resource`; an error when the traces have none."""
        y = self.cpu if resource == CPU else self.memory
        if y is None:
            raise ValueError(f"the traces have no {resource} usage")
        return y


def prepare(series: list[TraceSeries], step: float = STEP) -> ReplayData:
    """Resample every series to the common max-of-bucket grid (gaps stay NaN)."""
    if not series:
        raise ValueError("no series to replay")
    t0 = min(float(s.timestamps[0]) for s in series)
    t1 = max(float(s.timestamps[-1]) for s in series)
    start = np.floor(t0 / step) * step
    n = int((t1 - start) // step) + 1

    def grid(get: Callable[[TraceSeries], np.ndarray | None], scale: float) -> np.ndarray | None:
        if all(get(s) is None for s in series):
            return None
        out = np.full((len(series), n), np.nan)
        for i, s in enumerate(series):
            v = get(s)
            if v is not None:
                out[i] = resample_max(s.timestamps, v * scale, step, start, n)
        return out

    cpu = grid(lambda s: s.cpu, 1000.0)
    mem = grid(lambda s: s.memory, 1.0)
    if cpu is None:
        raise ValueError("no series has CPU usage")
    have = np.isfinite(cpu) if mem is None else np.isfinite(cpu) | np.isfinite(mem)
    first = np.argmax(have, axis=1)
    return ReplayData(
        start=start,
        cpu=cpu,
        memory=mem,
        cpu_capacity=grid(lambda s: s.cpu_capacity, 1000.0),
        memory_capacity=grid(lambda s: s.memory_capacity, 1.0),
        first=first,
        names=[str(s.key) for s in series],
    )


class Policy:
    """A sizing policy under replay. Subclasses fill `decide` and may react to OOMs."""

    name = "policy"
    up: Threshold = Threshold("percent", 0.0)
    down: Threshold = Threshold("percent", 0.0)
    resources: tuple[str, ...] = (CPU, MEMORY)
    """The resources the policy sizes (a sweep point may size only the one it is for)."""
    in_force: dict[str, np.ndarray]
    """The requests in force, per resource (set by `replay` before each decision)."""

    def start(self, data: ReplayData) -> None:
        self.data = data

    def decide(self, i: int) -> dict[str, np.ndarray]:
        """Targets per resource (S,) after observing sample i (NaN = keep)."""
        raise NotImplementedError

    def on_oom(self, j: int, mask: np.ndarray, request: np.ndarray) -> np.ndarray | None:
        """Memory OOM kills at sample j; may return new memory targets (NaN = keep)."""
        return None


# --- Reference policies -------------------------------------------------------------------


class ManualPolicy(Policy):
    """The provisioned capacity recorded in the trace (what a person chose)."""

    name = "manual"

    def decide(self, i: int) -> dict[str, np.ndarray]:
        out = {}
        for res, cap in ((CPU, self.data.cpu_capacity), (MEMORY, self.data.memory_capacity)):
            if cap is not None:
                # The capacity in force at the next sample (it is known, not forecast).
                j = min(i + 1, cap.shape[1] - 1)
                out[res] = cap[:, j]
        return out


class ClairvoyantPolicy(Policy):
    """The maximum of the next decision interval, known in advance: the physical limit."""

    name = "clairvoyant"

    def decide(self, i: int) -> dict[str, np.ndarray]:
        out = {}
        for res, y in ((CPU, self.data.cpu), (MEMORY, self.data.memory)):
            if y is None:
                continue
            nxt = y[:, i + 1 : i + 1 + DECISION_EVERY]
            if nxt.shape[1] == 0:
                out[res] = np.full(y.shape[0], np.nan)
                continue
            filled = np.where(np.isnan(nxt), -np.inf, nxt)
            mx = filled.max(axis=1)
            out[res] = np.where(np.isfinite(mx), mx, np.nan)
        return out


class _Hist:
    """Exponential-bucket histograms of many series, VPA's bucket scheme.

    Bucket b starts at first*(ratio^b - 1)/(ratio - 1); a percentile is reported as the end
    of its bucket, as VPA's histogram does.
    """

    def __init__(self, n: int, first: float, ratio: float, maximum: float) -> None:
        self.first, self.ratio = first, ratio
        self.nb = int(np.ceil(np.log(maximum * (ratio - 1) / first + 1) / np.log(ratio))) + 1
        self.w = np.zeros((n, self.nb))

    def bucket(self, v: np.ndarray) -> np.ndarray:
        b = np.floor(
            np.log(np.maximum(v, 0) * (self.ratio - 1) / self.first + 1) / np.log(self.ratio)
        )
        out: np.ndarray = np.clip(np.nan_to_num(b), 0, self.nb - 1).astype(np.int64)
        return out

    def add(self, v: np.ndarray, weight: np.ndarray | float = 1.0) -> None:
        ok = np.isfinite(v)
        rows = np.nonzero(ok)[0]
        w = np.broadcast_to(np.asarray(weight, dtype=float), v.shape)[ok]
        np.add.at(self.w, (rows, self.bucket(v[ok])), w)

    def start_of(self, b: np.ndarray) -> np.ndarray:
        return self.first * (self.ratio**b - 1) / (self.ratio - 1)

    def percentile(self, q: float, w: np.ndarray | None = None) -> np.ndarray:
        w = self.w if w is None else w
        cum = np.cumsum(w, axis=1)
        total = cum[:, -1]
        b = np.argmax(cum >= q * total[:, None] * (1 - 1e-12), axis=1)
        out = self.start_of(b + 1.0)
        return np.where(total > 0, out, np.nan)


class VPAPolicy(Policy):
    """Kubernetes VPA recommender, documented defaults (architecture §3.7).

    CPU: decaying histogram of usage samples (24 h half-life, buckets 5% apart from 10m),
    target = p90 x 1.15, at least 25m. Memory: decaying histogram of daily peaks (24 h
    intervals, 8 kept, buckets 5% apart from 10 MB), target = p90 x 1.15, at least 250 MiB;
    an OOM adds a peak of max(usage + 100 MiB, usage x 1.2). Changes of >= 10% are applied.
    Samples carry unit weight (VPA weighs CPU samples by the request; a replay without
    fixed requests cannot).
    """

    name = "vpa"
    up = Threshold("percent", 10.0)
    down = Threshold("percent", 10.0)
    HALF_LIFE = 86400.0
    MARGIN = 1.15
    Q = 0.90
    MIN_CPU = 25.0
    MIN_MEM = 250.0 * MIB
    DAYS = 8

    def start(self, data: ReplayData) -> None:
        super().start(data)
        s, t = data.shape
        self.cpu_h = _Hist(s, 10.0, 1.05, 1e6)  # millicores: 0.01 cores .. 1000 cores
        self.fed = 0  # samples fed to the CPU histogram
        if data.memory is not None:
            self.mem_h = _Hist(s, 1e7, 1.05, 1e12)
            days = t // 288 + 1
            self.peaks = np.full((s, days), np.nan)  # daily peaks (incl. OOM samples)

    def _feed(self, i: int) -> None:
        while self.fed <= i:
            j = self.fed
            # Weight grows with time instead of decaying old weights (same ratios, VPA's
            # own trick); renormalised by the percentile, so the scale cancels out.
            self.cpu_h.add(self.data.cpu[:, j], np.exp2(j * STEP / self.HALF_LIFE - 40.0))
            if self.data.memory is not None:
                d = j // 288
                v = self.data.memory[:, j]
                self.peaks[:, d] = np.fmax(self.peaks[:, d], v)
            self.fed += 1

    def _mem_target(self, i: int) -> np.ndarray:
        d = i // 288
        lo = max(0, d - self.DAYS + 1)
        vals = self.peaks[:, lo : d + 1]
        h = np.zeros_like(self.mem_h.w)
        for k in range(vals.shape[1]):
            age = (d - (lo + k)) * 86400.0
            v = vals[:, k]
            ok = np.isfinite(v)
            rows = np.nonzero(ok)[0]
            np.add.at(h, (rows, self.mem_h.bucket(v[ok])), np.exp2(-age / self.HALF_LIFE))
        return np.fmax(self.mem_h.percentile(self.Q, h) * self.MARGIN, self.MIN_MEM)

    def decide(self, i: int) -> dict[str, np.ndarray]:
        self._feed(i)
        out = {CPU: np.fmax(self.cpu_h.percentile(self.Q) * self.MARGIN, self.MIN_CPU)}
        if self.data.memory is not None:
            out[MEMORY] = self._mem_target(i)
        return out

    def on_oom(self, j: int, mask: np.ndarray, request: np.ndarray) -> np.ndarray | None:
        self._feed(j)
        u = self.data.usage(MEMORY)[:, j]
        bump = np.fmax(u + 100 * MIB, u * 1.2)
        d = j // 288
        self.peaks[:, d] = np.where(mask, np.fmax(self.peaks[:, d], bump), self.peaks[:, d])
        return np.where(mask, self._mem_target(j), np.nan)


class KRRPolicy(Policy):
    """Robusta KRR's simple strategy: CPU = p95 of 14 days; memory = 14-day max + 15%.

    The p95 comes from a sliding histogram with buckets 1% apart (reported as the bucket
    end: at most 1% above the exact percentile). KRR is a report: no OOM reaction and no
    hysteresis beyond rounding.
    """

    name = "krr"
    WINDOW = 14 * 288

    def start(self, data: ReplayData) -> None:
        super().start(data)
        s, _ = data.shape
        self.h = _Hist(s, 1.0, 1.01, 1e6)
        self.fed = 0
        if data.memory is not None:
            self.mem_f = np.where(np.isnan(data.memory), -np.inf, data.memory)

    def decide(self, i: int) -> dict[str, np.ndarray]:
        cpu = self.data.cpu
        while self.fed <= i:
            self.h.add(cpu[:, self.fed], 1.0)
            old = self.fed - self.WINDOW
            if old >= 0:
                self.h.add(cpu[:, old], -1.0)
            self.fed += 1
        np.maximum(self.h.w, 0, out=self.h.w)  # float cancellation
        out = {CPU: self.h.percentile(0.95)}
        if self.data.memory is not None:
            mx = self.mem_f[:, max(0, i - self.WINDOW + 1) : i + 1].max(axis=1)
            out[MEMORY] = np.where(np.isfinite(mx), mx * 1.15, np.nan)
        return out


# --- Foresize -----------------------------------------------------------------------------


class ForesizePolicy(Policy):
    """Foresize as it ships: every decision is one call of the recommender's entry point
    (`recommend_batch`, the call `plan_suggestions` makes for the operator and the
    simulator) over every series, each one target of one container: its last 14 days on
    the model grid, the requests in force as its current resources, and the OOM, forecast
    and CPU-schedule states carried from call to call as the operator carries them. A
    request is published as the operator publishes it: where the recommender judged the
    move significant (its hysteresis), else the one in force stays. An OOM kill makes the
    killed series due at once, as `reconcile` makes a target with a fresh kill due."""

    CONTAINER = "c"
    # The recommender's own hysteresis decides (`RecommendResult.changed`): the harness
    # adds none of its own.
    up = Threshold("percent", 0.0)
    down = Threshold("percent", 0.0)

    def __init__(
        self,
        mode: str = "balanced",
        *,
        buffer_percentage: float = 0.0,
        percentile_value: float | None = None,
        resources: tuple[str, ...] = (CPU, MEMORY),
    ) -> None:
        self.mode = mode
        self.resources = resources
        self.name = "foresize" if mode == "balanced" else f"foresize:{mode}"
        model = ResourceModel(mode, percentile_value, buffer_percentage)
        # The API's defaults (forecast every 15 minutes over a 15-minute horizon, 24 h of
        # lookback, the default thresholds and OOM stabilization), this mode for both.
        self.params = RecommendParams(cpu=model, memory=model)

    def start(self, data: ReplayData) -> None:
        super().start(data)
        s, _ = data.shape
        self.oom_state: list[dict[str, OOMState] | None] = [None] * s
        self.forecast_state: list[dict[str, OnlineScores]] = [{} for _ in range(s)]
        self.schedule_state: list[dict[str, CachedSchedule]] = [{} for _ in range(s)]
        self.in_force = {}
        self.kills: list[list[tuple[float, float]]] = [[] for _ in range(s)]  # (time, usage)
        self.at_mode: dict[int, float] = {}  # the fleet's memory at the mode's level
        self.models: dict[str, list[np.ndarray]] = {CPU: [], MEMORY: []}
        self.chosen: dict[str, list[np.ndarray]] = {CPU: [], MEMORY: []}  # level per decision

    def _history(self, k: int, i: int) -> ContainerHistory:
        """Series `k` as the recommender reads a container: the samples up to `i` of the
        last `HISTORY_WINDOW` (cores, bytes), its first sample and its OOM kills."""
        d = self.data
        a = max(0, i + 1 - int(HISTORY_WINDOW // STEP))
        cpu = d.cpu[k, a : i + 1] / TO_CANONICAL[CPU]
        memory = d.memory[k, a : i + 1] if d.memory is not None else np.full(cpu.size, np.nan)
        kills = [(t, u) for t, u in self.kills[k] if t > d.start + i * STEP - HISTORY_WINDOW]
        return ContainerHistory(
            cpu,
            memory,
            first_seen=d.start + float(d.first[k]) * STEP,
            oom_times=[t for t, _ in kills],
            oom_usage=[u for _, u in kills],
        )

    def _current(self, k: int) -> ResourceRequirements:
        """The requests in force; a series with none yet starts from the smallest one of
        each resource (a container with no request is BestEffort, which the recommender
        never changes: the replay's containers are sized from their first decision)."""
        requests = {}
        for res in (CPU, MEMORY):
            held = self.in_force[res][k] if res in self.in_force else np.nan
            requests[res] = int(held) if np.isfinite(held) else 1
        return ResourceRequirements(requests, {})

    def _recommend(self, series: np.ndarray, i: int) -> dict[str, np.ndarray]:
        """The published requests of `series` after sample `i` (NaN: the one in force
        stays), from one `recommend_batch` call; the states carried on."""
        # Decided at the end of sample i's bucket: the last history column is `now`'s.
        now = self.data.start + (i + 1) * STEP - 1.0
        requests = [
            TargetRequest(
                self.params,
                {self.CONTAINER: self._history(k, i)},
                {self.CONTAINER: self._current(k)},
                self.oom_state[k],
                self.forecast_state[k],
                self.schedule_state[k],
            )
            for k in series
        ]
        # Priced against the fleet's latest memory at the mode's level, as the operator
        # prices a round (`plan_suggestions`); the first round against itself.
        fleet = list(self.at_mode.values())
        reference = sum(fleet) / len(fleet) if fleet else None
        results = recommend_batch(requests, now, memory_reference=reference)
        s, _ = self.data.shape
        out = {res: np.full(s, np.nan) for res in (CPU, MEMORY)}
        levels = {res: np.full(len(series), np.nan) for res in (CPU, MEMORY)}
        models = {res: np.full(len(series), "", dtype=object) for res in (CPU, MEMORY)}
        for j, (k, result) in enumerate(zip(series, results, strict=True)):
            self.oom_state[k] = result.oom_state
            self.forecast_state[k] = result.forecast_state or {}
            self.schedule_state[k] = result.schedule_state or {}
            if self.CONTAINER in result.at_mode:
                self.at_mode[int(k)] = result.at_mode[self.CONTAINER]
            proposed = result.suggestion.containers[self.CONTAINER].requests
            changed = result.changed.get(self.CONTAINER, {})
            for res in (CPU, MEMORY):
                if changed.get(res) and res in proposed:
                    out[res][k] = proposed[res]
                levels[res][j] = result.quantiles.get(self.CONTAINER, {}).get(res, np.nan)
                models[res][j] = result.models.get(self.CONTAINER, {}).get(res, "")
        self._levels, self._models = levels, models
        return out

    def decide(self, i: int) -> dict[str, np.ndarray]:
        s, _ = self.data.shape
        published = self._recommend(np.arange(s), i)
        for res in (CPU, MEMORY):
            self.chosen[res].append(self._levels[res])
            self.models[res].append(self._models[res])
        out = {CPU: published[CPU]} if CPU in self.resources else {}
        if self.data.memory is not None and MEMORY in self.resources:
            out[MEMORY] = published[MEMORY]
        return out

    def on_oom(self, j: int, mask: np.ndarray, request: np.ndarray) -> np.ndarray | None:
        if MEMORY not in self.resources:
            return None
        killed = np.flatnonzero(mask)
        usage = self.data.usage(MEMORY)[:, j]
        for k in killed:
            self.kills[k].append((self.data.start + j * STEP, float(usage[k])))
        return self._recommend(killed, j)[MEMORY]


# --- The harness --------------------------------------------------------------------------


def _apply(
    cur: np.ndarray, target: np.ndarray, res: str, pol: Policy
) -> tuple[np.ndarray, np.ndarray]:
    tgt = round_up(res, target)
    up = pol.up.get(res, Threshold()) if isinstance(pol.up, dict) else pol.up
    down = pol.down.get(res, Threshold()) if isinstance(pol.down, dict) else pol.down
    change = np.isfinite(tgt) & passes_hysteresis(cur, tgt, up, down, res) & (tgt != cur)
    return np.where(change, tgt, cur), change


def replay(
    data: ReplayData, policy: Policy, keep: dict[str, object] | None = None
) -> dict[str, ResourceScore]:
    """Run one policy over the data; scores per resource. `keep` receives the request
    matrices and the OOM mask (for per-series breakdowns)."""
    s, t = data.shape
    policy.start(data)
    resources = [(CPU, data.cpu)] + ([(MEMORY, data.memory)] if data.memory is not None else [])
    resources = [(r, y) for r, y in resources if r in policy.resources]
    req = {r: np.full((s, t), np.nan) for r, _ in resources}
    cur = {r: np.full(s, np.nan) for r, _ in resources}
    changes = {r: np.zeros((s, t), dtype=bool) for r, _ in resources}
    ooms = np.zeros((s, t), dtype=bool)
    for j in range(t):
        for r, _ in resources:
            req[r][:, j] = cur[r]
        if MEMORY in cur:
            over = data.usage(MEMORY)[:, j] > cur[MEMORY]  # NaN compares False: gaps never kill
            if over.any():
                ooms[:, j] = over
                policy.in_force = {r: v.copy() for r, v in cur.items()}
                new = policy.on_oom(j, over, cur[MEMORY])
                if new is not None:
                    cur[MEMORY], ch = _apply(
                        cur[MEMORY], np.where(over, new, np.nan), MEMORY, policy
                    )
                    if j + 1 < t:
                        changes[MEMORY][:, j + 1] |= ch
        if j % DECISION_EVERY == DECISION_EVERY - 1:
            policy.in_force = {r: v.copy() for r, v in cur.items()}
            targets = policy.decide(j)
            for r, _ in resources:
                if r in targets:
                    cur[r], ch = _apply(cur[r], targets[r], r, policy)
                    if j + 1 < t:
                        changes[r][:, j + 1] |= ch
    if keep is not None:
        keep.update(req=req, ooms=ooms, changes=changes)
    out = {}
    for r, y in resources:
        # THE scoring (`foresize.core.recommend.score`), which the operator's shadow
        # policies use too: the replay's requests and changes after the warm-up.
        scored_from, _last, _days = scored_span(data.first, y)
        out[r] = score_resource(r, y, req[r], scored_from, STEP, changes[r])
    return out


def scored_span(first: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """The scored stretch of each series of `y` (S, T): the first scored column (after the
    warm-up from the series' first sample `first`), the series' last sample (changes
    count up to it), and the fleet's scored series-days (the denominator of the rates)."""
    scored_from = first + int(WARMUP / STEP)
    last = last_sample(y)
    series_days = float(np.maximum(last + 1 - scored_from, 0).sum()) * STEP / 86400.0
    return scored_from, last, series_days


# --- Comparison at equal risk ---------------------------------------------------------------


def risk_frontier(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The (risk, slack) points no other point beats on both axes, by increasing risk.

    A point with more risk and more slack than another is not on the curve: choosing the
    quantile that gave the other is better on both counts. Ties keep the lower slack.
    """
    pts = sorted((float(r), float(s)) for r, s in points if np.isfinite(r) and np.isfinite(s))
    out: list[tuple[float, float]] = []
    for r, s in pts:
        # Sorted by risk then slack: a later point is on the curve only with less slack
        # than every point of less (or equal) risk.
        if not out or s < out[-1][1]:
            out.append((r, s))
    return out


def matched_slack(points: list[tuple[float, float]], risk: float) -> float | None:
    """Slack of the (risk, slack) curve at `risk`, interpolated linearly in log risk
    between the two adjacent points of its frontier (`risk_frontier`); None when `risk`
    lies outside the curve (never extrapolated).

    A curve point at zero risk cannot be placed on a log axis: between it and the next
    point the safer (zero-risk) point's slack is reported, an upper bound of the curve
    there (conservative: it never flatters the policy).
    """
    curve = risk_frontier(points)
    if not curve or not np.isfinite(risk) or risk < 0:
        return None
    for r, s in curve:
        if r == risk:
            return s
    for (r0, s0), (r1, s1) in itertools.pairwise(curve):
        if r0 < risk < r1:
            if r0 <= 0:
                return s0
            w = (np.log(risk) - np.log(r0)) / (np.log(r1) - np.log(r0))
            return float(s0 + w * (s1 - s0))
    return None
