"""How little CPU slack a request changed a few times a day can have: a bound on any policy.

The replay (`recommend.replay`) holds a request over each 15-minute decision interval and
scores slack and shortfall over the scored samples. For a known future, the request with
least slack at a given shortfall and at most a given number of changes (a fleet average
per series-day) is a piecewise-constant level per series with free change points. It is
found by Lagrangian relaxation: for multipliers lam (on the deficit) and mu (on each
change) the fleet problem

    minimise  excess + lam x deficit + mu x changes      (sums over scored samples)

splits into one problem per series, solved by dynamic programming over its decision
intervals with the request's level as the state. For a fixed segment the best level is
the lam / (1 + lam) quantile of its samples (the pinball loss), so only the change
points need searching.

Two numbers come out of each (lam, mu):

- a **lower bound** (`Solution.relaxed`): the level axis is cut into cells (geometric,
  `resolution` apart, below the series' highest sample), an interval's cost in a cell is
  its least cost anywhere in the cell (its cost is convex in the level: at its own
  quantile clipped to the cell) and moving within a cell is free. Every policy costs at
  least this relaxed minimum, whatever the cells, so for any policy with deficit <= D and
  changes <= C: excess >= relaxed - lam x D - mu x C (weak duality). The cells only decide
  how tight it is;
- an **achieved schedule** (`Solution.excess`, `deficit`, `changes`): the relaxed
  solution's change points, each segment at the exact quantile of its samples, measured
  exactly. A real request schedule: the optimum lies between the two.

Slack = excess / total request, and total request = usage + excess - deficit, so at a
shortfall s (deficit = s x usage) slack = excess / (usage x (1 - s) + excess), increasing
in excess: a lower bound on excess is one on slack. Hysteresis and rounding are not
modelled: they only restrict a policy, so the bound stays a bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from foresize.bench.replay import DECISION_EVERY, scored_span

CELL_RESOLUTION = 0.02
"""Neighbouring cells' levels differ by 2%: the lower bound and the achieved schedule
then agree to about a percent of slack (finer cells tighten it at more run time)."""

LOGIT = 15.0
"""The lam search stays within quantiles 1 / (1 + e^15) ... 1 - that (lam e^-15 ... e^15)."""

LEVEL_SPAN = 1000.0
"""The cells cover levels down to 1/1000 of a series' highest sample; everything below is
one cell [0, top / 1000] (still a valid bound, only looser for near-idle levels)."""


@dataclass(frozen=True, slots=True)
class Blocks:
    """A fleet's scored usage per decision interval (the unit a request holds over)."""

    usage: np.ndarray
    """(S, B, n): usage of each interval's samples, NaN where not scored (warm-up, gaps)."""
    first: np.ndarray
    """(S,): the first interval with a scored column: its level is free (the change to it
    can be made before scoring starts)."""
    last: np.ndarray
    """(S,): the last interval whose start counts as a change (the series' last sample)."""
    series_days: float
    total_usage: float

    @classmethod
    def from_grid(cls, y: np.ndarray, first: np.ndarray, every: int = DECISION_EVERY) -> Blocks:
        """The replay's grid `y` (S, T) cut into its decision intervals (columns
        [every x b, every x b + every), decisions after columns every - 1, 2 every - 1, ...
        applying from the next), scored as the replay scores (`scored_span`)."""
        s, t = y.shape
        scored_from, last, series_days = scored_span(first, y)
        cols = np.arange(t)[None, :]
        u = np.where((cols >= scored_from[:, None]) & np.isfinite(y), y, np.nan)
        b = -(-t // every)
        u = np.concatenate([u, np.full((s, b * every - t), np.nan)], axis=1)
        return cls(
            usage=u.reshape(s, b, every),
            first=scored_from // every,
            last=last // every,
            series_days=series_days,
            total_usage=float(np.nansum(u)),
        )


@dataclass(frozen=True, slots=True)
class Solution:
    """One Lagrangian solve: the relaxed minimum (a lower bound) and the schedule found."""

    lam: float
    mu: float
    relaxed: float
    excess: float
    deficit: float
    changes: int
    levels: np.ndarray
    """(S, B): the achieved schedule's request per interval (NaN before any sample)."""
    per_series: np.ndarray
    """(3, S): each series' excess, deficit and changes (schedules can be mixed)."""

    def dual(self, deficit: float, changes: float) -> float:
        """The least excess of any policy with at most this deficit and these changes."""
        return self.relaxed - self.lam * deficit - self.mu * changes


def quantile_of(values: np.ndarray, tau: float) -> np.ndarray:
    """The lam / (1 + lam) = tau quantile along the last axis ignoring NaN, as the pinball
    loss defines it: the smallest sample with at least tau of the samples at or below it
    (0 where there is none). It minimises sum (r - u)+ + lam (u - r)+ over r."""
    v = np.sort(values, axis=-1)  # NaN last
    n = np.isfinite(v).sum(axis=-1)
    idx = np.maximum(np.ceil(tau * n - 1e-9).astype(np.int64) - 1, 0)
    q = np.take_along_axis(v, idx[..., None], axis=-1)[..., 0]
    return np.where(n > 0, q, 0.0)


def pinball_cost(levels: np.ndarray, usage: np.ndarray, lam: float) -> np.ndarray:
    """sum over the last axis of `usage` of (level - u)+ + lam (u - level)+, NaN samples
    skipped; `levels` broadcasts against `usage` without its last axis."""
    d = levels[..., None] - np.nan_to_num(usage)
    cost = np.where(d > 0, d, -lam * d) * np.isfinite(usage)
    out: np.ndarray = cost.sum(axis=-1)
    return out


@dataclass(frozen=True, slots=True)
class Cells:
    """The relaxation's level cells per series and each interval's excess at their edges
    (computed once; a solve only weighs them with its lam)."""

    edges: np.ndarray
    """(S, K + 1): 0, then geometric (`resolution` apart) up to the series' highest sample."""
    excess: np.ndarray
    """(S, B, K + 1) float32: sum over the interval's samples of (edge - u)+."""
    count: np.ndarray
    """(S, B): the interval's scored samples."""
    total: np.ndarray
    """(S, B): their sum."""
    resolution: float

    @classmethod
    def build(
        cls,
        blocks: Blocks,
        resolution: float = CELL_RESOLUTION,
        span: float = LEVEL_SPAN,
        chunk: int = 64,
    ) -> Cells:
        u = blocks.usage
        s, nb, _ = u.shape
        top = np.nanmax(np.where(np.isfinite(u), u, -np.inf), axis=(1, 2))
        top = np.where(np.isfinite(top) & (top > 0), top, 1.0)
        k = int(np.ceil(np.log(span) / np.log1p(resolution)))
        ratios = (1.0 + resolution) ** np.arange(-k + 1, 1)
        edges = np.concatenate([np.zeros((s, 1)), top[:, None] * ratios[None, :]], axis=1)
        excess = np.empty((s, nb, k + 1), dtype=np.float32)
        for c0 in range(0, nb, chunk):
            excess[:, c0 : c0 + chunk] = _excess(edges[:, None, :], u[:, c0 : c0 + chunk])
        return cls(
            edges=edges,
            excess=excess,
            count=np.isfinite(u).sum(axis=2),
            total=np.nansum(u, axis=2),
            resolution=resolution,
        )

    def cell_costs(
        self, b0: int, b1: int, q: np.ndarray, qcost: np.ndarray, lam: float
    ) -> np.ndarray:
        """(S, b1 - b0, K): the least cost of intervals b0..b1-1 in each cell at lam: the
        lower of the costs at the cell's edges, or at the interval's own quantile `q`
        (cost `qcost`) in the cell holding it (the cost is convex in the level)."""
        e = self.edges[:, None, :]
        over = self.excess[:, b0:b1]
        under = over - (self.count[:, b0:b1, None] * e - self.total[:, b0:b1, None])
        at_edge = over + lam * under
        cost: np.ndarray = np.minimum(at_edge[..., :-1], at_edge[..., 1:])
        kc = cost.shape[2]
        top = self.edges[:, -1][:, None]
        pos = np.log(np.maximum(q, 1e-300) / top) / np.log1p(self.resolution)
        cell = np.clip(np.floor(pos).astype(np.int64) + kc, 0, kc - 1)
        np.put_along_axis(cost, cell[..., None], qcost[..., None], axis=2)
        return cost


def _excess(levels: np.ndarray, usage: np.ndarray) -> np.ndarray:
    """(S, B, K): sum over each interval's samples `usage` (S, B, n) of (level - u)+, NaN
    samples skipped, for every level of `levels` (S, 1, K)."""
    d = levels[..., None] - np.nan_to_num(usage)[:, :, None, :]
    out: np.ndarray = (np.maximum(d, 0.0) * np.isfinite(usage)[:, :, None, :]).sum(axis=-1)
    return out


def solve(
    blocks: Blocks,
    lam: float,
    mu: float,
    cells: Cells | None = None,
    *,
    chunk: int = 64,
) -> Solution:
    """The Lagrangian problem at (lam, mu): relaxed minimum and achieved schedule.

    mu = 0 (changes free) is solved exactly: every interval at its own quantile."""
    tau = lam / (1.0 + lam)
    u = blocks.usage
    s, nb, _ = u.shape
    if mu <= 0:
        levels = quantile_of(u, tau)
        relaxed = float(pinball_cost(levels, u, lam).sum())
        return _measure(blocks, lam, mu, relaxed, levels)
    cells = cells if cells is not None else Cells.build(blocks)
    kc = cells.edges.shape[1] - 1
    rows = np.arange(s)
    b0 = int(max(blocks.first.min(), 0))
    b1 = int(min(blocks.last.max(), nb - 1))
    value = np.zeros((s, kc))
    best = np.zeros(s)
    span_b = max(b1 - b0 + 1, 0)
    switched = np.zeros((span_b, s, kc), dtype=bool)
    best_cell = np.zeros((span_b, s), dtype=np.int64)
    for c0 in range(b0, b1 + 1, chunk):
        c1 = min(c0 + chunk, b1 + 1)
        q = quantile_of(u[:, c0:c1], tau)
        cost = cells.cell_costs(c0, c1, q, pinball_cost(q, u[:, c0:c1], lam), lam)
        for b in range(c0, c1):
            # Before a series' first scored interval every cell costs 0 so far: its
            # first level is free (set before scoring starts), with no special case.
            move = (best + mu)[:, None]
            sw = move < value
            value = cost[:, b - c0] + np.where(sw, move, value)
            switched[b - b0] = sw
            cell = value.argmin(axis=1)
            best_cell[b - b0] = cell
            best = value[rows, cell]
    relaxed = float(best.sum()) if span_b else 0.0
    # Back along the optimal path: where it switched cells a new segment starts.
    starts = np.zeros((s, nb), dtype=bool)
    cell = best_cell[-1] if span_b else np.zeros(s, dtype=np.int64)
    for b in range(b1, b0, -1):
        sw = switched[b - b0, rows, cell]
        starts[:, b] = sw
        cell = np.where(sw, best_cell[b - b0 - 1], cell)
    return _measure(blocks, lam, mu, relaxed, _segment_levels(u, starts, tau))


def _segment_levels(u: np.ndarray, starts: np.ndarray, tau: float) -> np.ndarray:
    """(S, B) request per interval: each segment (a run of intervals from a start to the
    next) at the tau quantile of its scored samples; NaN for a segment without any."""
    s, nb, n = u.shape
    seg = np.cumsum(starts, axis=1) + (np.arange(s) * (nb + 1))[:, None]  # unique per series
    _, seg = np.unique(seg, return_inverse=True)
    seg = seg.reshape(s, nb)
    flat_seg = np.repeat(seg.ravel(), n)
    flat_u = u.ravel()
    ok = np.isfinite(flat_u)
    keys, vals = flat_seg[ok], flat_u[ok]
    order = np.lexsort((vals, keys))
    keys, vals = keys[order], vals[order]
    nseg = int(seg.max()) + 1
    count = np.bincount(keys, minlength=nseg)
    start = np.cumsum(count) - count
    idx = start + np.maximum(np.ceil(tau * count - 1e-9).astype(np.int64) - 1, 0)
    level = np.full(nseg, np.nan)
    has = count > 0
    level[has] = vals[idx[has]]
    out: np.ndarray = level[seg]
    return out


def _measure(blocks: Blocks, lam: float, mu: float, relaxed: float, levels: np.ndarray) -> Solution:
    """Score a schedule as the replay does: excess and deficit over scored samples,
    changes at interval starts after the first scored one up to the series' last sample
    (an interval without samples keeps the level before it)."""
    u = blocks.usage
    held = _forward_fill(levels)
    d = held[:, :, None] - u
    ok = np.isfinite(u) & np.isfinite(held)[:, :, None]
    excess = np.where(ok & (d > 0), d, 0.0).sum(axis=(1, 2))
    deficit = np.where(ok & (d < 0), -d, 0.0).sum(axis=(1, 2))
    b = np.arange(u.shape[1])[None, 1:]
    counted = (b > blocks.first[:, None]) & (b <= blocks.last[:, None])
    moved = np.isfinite(held[:, 1:]) & np.isfinite(held[:, :-1]) & (held[:, 1:] != held[:, :-1])
    changes = (moved & counted).sum(axis=1)
    return Solution(
        lam=lam,
        mu=mu,
        relaxed=relaxed,
        excess=float(excess.sum()),
        deficit=float(deficit.sum()),
        changes=int(changes.sum()),
        levels=held,
        per_series=np.stack([excess, deficit, changes.astype(float)]),
    )


def _forward_fill(x: np.ndarray) -> np.ndarray:
    """NaN entries take the last finite value before them along axis 1."""
    idx = np.where(np.isfinite(x), np.arange(x.shape[1])[None, :], 0)
    np.maximum.accumulate(idx, axis=1, out=idx)
    out: np.ndarray = np.take_along_axis(x, idx, axis=1)
    return out


# --- The bound at a shortfall and a change budget ------------------------------------------


@dataclass(frozen=True, slots=True)
class BoundRow:
    """The best a change budget allows at a shortfall, as slack (the replay's measure)."""

    budget: float | None
    """Changes per series-day (fleet average); None = unlimited."""
    lower: float
    """No request schedule with this shortfall and budget has less slack (weak duality)."""
    achieved: float
    """The slack of a concrete schedule found with at most this shortfall and budget."""
    achieved_shortfall: float
    achieved_changes: float
    """Changes per series-day of that schedule."""
    solves: int


def slack_of(excess: float, deficit: float, usage: float) -> float:
    """The replay's slack (excess over total request) from the sums; total request =
    usage + excess - deficit."""
    request = usage + excess - deficit
    return excess / request if request > 0 else 0.0


def cpu_bound(
    blocks: Blocks,
    shortfall: float,
    budgets: list[float | None],
    *,
    resolution: float = CELL_RESOLUTION,
    steps: int = 6,
) -> list[BoundRow]:
    """For each change budget (changes per series-day, None = unlimited), the least slack
    of any request schedule at `shortfall` (a lower bound) and a schedule that comes close
    (achieved).

    Every solve is a valid lower bound for every budget (weak duality) and every solve's
    schedules can be mixed series by series, so all budgets share one pool: mu is walked
    by factors of 4 until the pool's change counts bracket the budgets, then bisected in
    log towards each budget; at each mu, lam is searched (`steps` solves, from the lam of
    the nearest mu already solved) for the deficit just within `shortfall`."""
    usage = blocks.total_usage
    finite = sorted(b for b in budgets if b is not None)
    search = _Search(blocks, shortfall * usage, Cells.build(blocks, resolution) if finite else None)
    if None in budgets:
        search.at(0.0, 40)  # exact and cheap: every interval its own quantile
    if finite:
        days = max(blocks.series_days, 1e-300)
        # mu in units of one interval's cost at the fleet's mean usage.
        mu = usage / max(blocks.usage.shape[0] * blocks.usage.shape[1], 1)
        rates = {mu: search.at(mu, steps).changes / days}
        while min(rates.values()) > finite[0] and len(rates) < 20:
            mu = max(rates) * 4.0
            rates[mu] = search.at(mu, steps).changes / days
        while max(rates.values()) < finite[-1] and len(rates) < 40:
            mu = min(rates) / 4.0
            rates[mu] = search.at(mu, steps).changes / days
        for budget in finite:
            for _ in range(3):
                above = [m for m, r in rates.items() if r > budget]
                within = [m for m, r in rates.items() if r <= budget]
                if not above or not within:
                    break
                mu = float(np.sqrt(max(above) * min(within)))
                rates[mu] = search.at(mu, steps).changes / days
    return [search.row(b) for b in budgets]


class _Search:
    """The pool of solves of one fleet at one shortfall, and the lam search at a mu."""

    def __init__(self, blocks: Blocks, deficit: float, cells: Cells | None) -> None:
        self.blocks, self.deficit, self.cells = blocks, deficit, cells
        self.pool: list[Solution] = []
        self.logit_at: dict[float, float] = {}

    def at(self, mu: float, n: int) -> Solution:
        """Search lam at mu (in the logit of lam / (1 + lam), from the nearest mu solved):
        the schedule with the largest deficit within the target (else the last one)."""
        solved = [m for m in self.logit_at if (m > 0) == (mu > 0)]
        near = min(solved, key=lambda m: abs(np.log(m or 1.0) - np.log(mu or 1.0)), default=None)
        x = self.logit_at[near] if near is not None else 2.0
        lo, hi = -np.inf, np.inf  # logits with the deficit above / within the target
        step = 0.5
        best = None
        for _ in range(n):
            sol = solve(self.blocks, float(np.exp(x)), mu, self.cells)
            self.pool.append(sol)
            if sol.deficit > self.deficit:
                lo = x
            else:
                hi = x
                if best is None or sol.deficit > best.deficit:
                    best = sol
            if np.isfinite(lo) and np.isfinite(hi):
                x = 0.5 * (lo + hi)
            else:
                x = float(np.clip(x + step if np.isinf(hi) else x - step, -LOGIT, LOGIT))
                step *= 2.0
        self.logit_at[mu] = hi if np.isfinite(hi) else lo
        if mu == 0 and best is not None:
            # Changes free, the cost is convex in the levels: between the schedules just
            # within and just beyond the shortfall (both optimal at the lam between them)
            # every blend is optimal too; the one at the shortfall joins the pool.
            beyond = [p for p in self.pool if p.mu == 0 and p.deficit > self.deficit]
            if beyond:
                risky = min(beyond, key=lambda p: p.deficit)
                self.pool.append(_blend(self.blocks, best, risky, self.deficit))
        return best if best is not None else self.pool[-1]

    def row(self, budget: float | None) -> BoundRow:
        usage, days = self.blocks.total_usage, max(self.blocks.series_days, 1e-300)
        allowed = np.inf if budget is None else budget * days
        # Any solve bounds any budget; with changes unlimited only those that charged none.
        duals = [
            s.dual(self.deficit, allowed if s.mu > 0 else 0.0)
            for s in self.pool
            if s.mu == 0 or budget is not None
        ]
        lower_excess = max(0.0, *duals)
        excess, short, changes = _mixed(self.pool, self.deficit, allowed)
        return BoundRow(
            budget=budget,
            lower=slack_of(lower_excess, self.deficit, usage),
            achieved=slack_of(excess, short, usage),
            achieved_shortfall=short / usage if usage > 0 else 0.0,
            achieved_changes=changes / days,
            solves=len(self.pool),
        )


def _blend(blocks: Blocks, safe: Solution, risky: Solution, deficit: float) -> Solution:
    """The blend of two schedules' levels with the largest deficit within `deficit`
    (bisection on the weight); it proves nothing (relaxed = -inf), it is only achieved."""
    lo, hi = 0.0, 1.0  # weight of the risky schedule: lo within, hi beyond
    best = safe
    for _ in range(30):
        w = 0.5 * (lo + hi)
        levels = (1.0 - w) * safe.levels + w * risky.levels
        sol = _measure(blocks, safe.lam, 0.0, -np.inf, levels)
        if sol.deficit <= deficit:
            lo, best = w, sol
        else:
            hi = w
    return best


def _mixed(solutions: list[Solution], deficit: float, allowed: float) -> tuple[float, float, float]:
    """The least excess found by picking each series' schedule from any of `solutions`
    (series are independent) with the fleet's deficit <= `deficit` and changes <=
    `allowed`: from the best feasible solution, greedily move series to the schedule that
    frees the most excess per share of the deficit and changes it uses. Returns the
    (excess, deficit, changes) sums; the least infeasible solution when none is feasible."""
    stats = np.stack([s.per_series for s in solutions])  # (J, 3, S)
    total = stats.sum(axis=2)  # (J, 3)
    feasible = (total[:, 1] <= deficit) & (total[:, 2] <= allowed)
    if not feasible.any():
        over = np.maximum(total[:, 1] / max(deficit, 1e-300), total[:, 2] / allowed)
        j = int(np.argmin(over))
        return float(total[j, 0]), float(total[j, 1]), float(total[j, 2])
    j = int(np.argmin(np.where(feasible, total[:, 0], np.inf)))
    series = np.arange(stats.shape[2])
    pick = np.full(stats.shape[2], j)
    cur = total[j].copy()
    for _ in range(stats.shape[0] * stats.shape[2]):
        delta = stats - stats[pick, :, series].T[None]  # (J, 3, S): moving series s to j
        fits = (cur[1] + delta[:, 1] <= deficit) & (cur[2] + delta[:, 2] <= allowed)
        used = np.maximum(delta[:, 1], 0) / max(deficit, 1e-300)
        used = used + (np.maximum(delta[:, 2], 0) / allowed if np.isfinite(allowed) else 0.0)
        gain = np.where(fits & (delta[:, 0] < 0), -delta[:, 0] / (used + 1e-12), 0.0)
        if not (gain > 0).any():
            break
        jj, ss = np.unravel_index(int(np.argmax(gain)), gain.shape)
        cur += delta[jj, :, ss]
        pick[ss] = jj
    return float(cur[0]), float(cur[1]), float(cur[2])
