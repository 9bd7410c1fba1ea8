"""How well a sequence of requests met the usage that came: THE scoring, one home.

`bench recommend` (`foresize.bench.replay`) scores every policy it replays with it, and
the operator scores each target's shadow policies (`recommend.shadow`) with it on the
live history, so a shadow's numbers and the benchmark's mean the same thing.

Inputs are on one grid (the 5-minute model grid), canonical units (CPU millicores, memory
bytes), NaN = no sample / no request yet: `usage` (S, T), `requests` (S, T) the request in
force at each sample, `changes` (S, T) whether a change took effect at that sample.
Per resource over all series (sums over scored samples, then ratios):

- slack: sum(max(request - usage, 0)) / sum(request);
- shortfall: sum(max(usage - request, 0)) / sum(usage);
- under: the share of scored samples with usage above the request;
- events per series-day: CPU, upward crossings of usage over the request; memory, OOM
  kills (every sample above the request is one kill: the container restarts, so a
  continuing excess kills it again; a gap never kills);
- changes per series-day (while the series exists, up to its last sample).

A sample with no request counts as nothing reserved.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from foresize.core.api.quantity import MEMORY


@dataclass(slots=True)
class ResourceScore:
    slack: float
    shortfall: float
    under: float
    events_per_series_day: float
    changes_per_series_day: float
    # Events (memory: OOM kills) of each series in the scored period, for the per-series
    # view: a fleet average can hide a few containers killed over and over.
    series_events: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def as_dict(self) -> dict[str, float]:
        return {
            "slack": self.slack,
            "shortfall": self.shortfall,
            "under": self.under,
            "events_per_series_day": self.events_per_series_day,
            "changes_per_series_day": self.changes_per_series_day,
        }


def last_sample(y: np.ndarray) -> np.ndarray:
    """Per series of `y` (S, T), the column of its last sample (changes count up to it)."""
    return np.asarray(y.shape[1] - 1 - np.argmax(np.isfinite(y[:, ::-1]), axis=1))


def changes_of(requests: np.ndarray) -> np.ndarray:
    """Where a request took effect (S, T): a column whose request differs from the column
    before (a first request after none is a change)."""
    rq = np.asarray(requests, dtype=np.float64)
    out = np.zeros(rq.shape, dtype=bool)
    with np.errstate(invalid="ignore"):
        out[:, 1:] = np.isfinite(rq[:, 1:]) & ~(rq[:, 1:] == rq[:, :-1])
    return out


def score_resource(
    resource: str,
    usage: np.ndarray,
    requests: np.ndarray,
    scored_from: np.ndarray,
    step: float,
    changes: np.ndarray | None = None,
) -> ResourceScore:
    """THE score of one resource (module doc). `scored_from` (S,): the first scored column
    of each series. `changes`: where changes took effect (default: `changes_of`)."""
    y = np.asarray(usage, dtype=np.float64)
    rq = np.asarray(requests, dtype=np.float64)
    s, t = y.shape
    cols = np.arange(t)[None, :]
    last = last_sample(y) if t else np.zeros(s, np.int64)
    series_days = float(np.maximum(last + 1 - scored_from, 0).sum()) * step / 86400.0
    in_score = cols >= np.asarray(scored_from)[:, None]
    ok = in_score & np.isfinite(y)
    rq0 = np.where(np.isfinite(rq), rq, 0.0)  # no request yet = nothing reserved
    u = np.where(ok, y, 0.0)
    rqs = np.where(ok, rq0, 0.0)
    over = ok & (u > rqs)
    if resource == MEMORY:
        with np.errstate(invalid="ignore"):
            kills = y > rq  # NaN compares False: gaps never kill, nor does no request
        per_series = (kills & ok).sum(axis=1)
    else:
        prev = np.zeros_like(over)
        prev[:, 1:] = over[:, :-1]
        per_series = (over & ~prev).sum(axis=1)
    events = int(per_series.sum())
    changed = changes_of(rq) if changes is None else changes
    alive = cols <= last[:, None]
    total_req = rqs.sum()
    total_use = u.sum()
    return ResourceScore(
        slack=float(np.maximum(rqs - u, 0).sum() / total_req) if total_req > 0 else 0.0,
        shortfall=float(np.maximum(u - rqs, 0).sum() / total_use) if total_use > 0 else 0.0,
        under=float(over.sum() / max(ok.sum(), 1)),
        events_per_series_day=events / series_days if series_days else 0.0,
        changes_per_series_day=float((changed & in_score & alive).sum()) / series_days
        if series_days
        else 0.0,
        series_events=per_series.astype(np.int64),
    )
