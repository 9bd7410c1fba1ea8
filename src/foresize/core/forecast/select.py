"""Per-series model selection by a rolling backtest on the pinball loss of the max.

Two ways to get the backtest scores, with the same loss and the same models:
- `backtest_scores`: a cold-start batch backtest at `cfg.backtest_origins` past origins.
- `OnlineScores`: a rolling backtest kept as state between decisions: each decision's
  forecasts of every model are remembered and scored once their horizon has passed, with
  exponential forgetting (`cfg.score_half_life`). This is what a long-running loop (the
  operator, the simulator, the replay benchmark) should carry between calls.

`forecast_max` returns, per series and quantile, the forecast of the model with the lowest
score for *that* quantile (a model good at medians is not necessarily good at p99).
Pure: arrays in, arrays out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from foresize.core.forecast.models import (
    MODELS,
    ForecastConfig,
    all_models,
    forward_max,
    pinball,
)

DEFAULT_MODEL = MODELS.index("recent")
"""The simplest model (a quantile of the last day's maxima) is the default: used before
any backtest score exists, and kept unless another model is clearly better (SWITCH_MARGIN)."""


@dataclass(slots=True)
class Forecast:
    values: np.ndarray  # (S, Q): the selected model's quantile forecast of the max
    model: np.ndarray  # (S, Q): index into MODELS of the model used
    per_model: np.ndarray  # (len(MODELS), S, Q)

    def model_names(self) -> np.ndarray:
        names: np.ndarray = np.asarray(MODELS, dtype=object)[self.model]
        return names


def backtest_scores(
    y: np.ndarray, qs: np.ndarray, cfg: ForecastConfig, m: np.ndarray | None = None
) -> np.ndarray:
    """Mean pinball loss of each model at past origins: (len(MODELS), S, Q); NaN = unscored."""
    qs = np.asarray(qs, dtype=np.float64)
    if m is None:
        m = forward_max(y, cfg.h)
    t = y.shape[1]
    last = t - 1 - cfg.h  # the latest origin whose target max is fully observed
    spacing = cfg.steps(cfg.backtest_spacing)
    total = np.zeros((len(MODELS), y.shape[0], len(qs)))
    count = np.zeros_like(total)
    # Oldest origin first: the decaying histogram then only adds columns between origins.
    for k in reversed(range(cfg.backtest_origins)):
        o = last - k * spacing
        if o < cfg.h + 1:
            continue
        f = all_models(y, m, o, qs, cfg)
        loss = pinball(m[None, :, o, None], f, qs)
        ok = np.isfinite(loss)
        total += np.where(ok, loss, 0.0)
        count += ok
    with np.errstate(invalid="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


SWITCH_MARGIN = 0.10
"""Leave the default model only for one whose backtest loss is at least 10% lower: with a
few dozen scored windows, smaller differences are noise, and flapping between models
that forecast alike only adds resizes."""


def choose(scores: np.ndarray, margin: float = SWITCH_MARGIN) -> np.ndarray:
    """argmin over models per (series, quantile), keeping DEFAULT_MODEL unless another is
    better by `margin`; unscored -> DEFAULT_MODEL."""
    filled = np.where(np.isnan(scores), np.inf, scores)
    best = np.argmin(filled, axis=0)
    low = np.take_along_axis(filled, best[None], axis=0)[0]
    keep = filled[DEFAULT_MODEL] <= low * (1.0 + margin)
    best = np.where(keep, DEFAULT_MODEL, best)
    none = np.isinf(filled).all(axis=0)
    best[none] = DEFAULT_MODEL
    return best


SERIES_SHARD = 2000
"""Series forecast and recommended at once: `forecast_max` works on blocks of this many
rows, and callers with more series stream them by shards of it (`bench forecast`,
`recommend.stream`). The working set of a forecast (the forward maxima, the decaying
histograms, sorted windows) is several times its input's size, so
10,000 series of 14 days at once need over a GiB; a shard's 14 days (2,000 x 4,032
points, 65 MB a resource) peak at 224 MiB for the whole process at 10,000 and at 100,000
series (`bench forecast`, docs/scale.md), and numpy's per-call overhead is
already amortised at a thousand rows. Rows are independent in a cold-start forecast, so
the shard size changes no number."""


def forecast_max(
    y: np.ndarray,
    qs: np.ndarray,
    cfg: ForecastConfig | None = None,
    scores: np.ndarray | None = None,
) -> Forecast:
    """Quantile forecasts of the max over the next horizon for every row of `y`.

    `y` (S, T) is on the `cfg.step` grid with NaN gaps; its last column is now. Without
    `scores` a cold-start backtest selects the models.
    """
    cfg = cfg or ForecastConfig()
    qs = np.asarray(qs, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if y.shape[0] > SERIES_SHARD:
        # Rows are independent: forecast them in blocks to bound the working memory.
        parts = [
            forecast_max(
                y[c : c + SERIES_SHARD],
                qs,
                cfg,
                None if scores is None else scores[:, c : c + SERIES_SHARD],
            )
            for c in range(0, y.shape[0], SERIES_SHARD)
        ]
        return Forecast(
            np.concatenate([p.values for p in parts]),
            np.concatenate([p.model for p in parts]),
            np.concatenate([p.per_model for p in parts], axis=1),
        )
    m = forward_max(y, cfg.h)
    if scores is None:
        scores = backtest_scores(y, qs, cfg, m)
    per_model = all_models(y, m, y.shape[1] - 1, qs, cfg)
    vals, best = _pick(per_model, scores)
    return Forecast(_monotone(vals, qs), best, per_model)


@dataclass(slots=True)
class OnlineScores:
    """Rolling-backtest state: decayed pinball-loss sums of each model, the calibration of
    the quantile level, and forecasts waiting for their horizon to pass. Carry it between
    decisions (and checkpoint it: it is small)."""

    loss: np.ndarray  # (len(MODELS), S, Q) decayed loss sums
    weight: np.ndarray  # same shape, decayed counts
    log_factor: np.ndarray  # (models, S, Q) calibration (log): issued = forecast x exp(g)
    # (origin, per-model forecasts (models, S, Q), issued forecast (S, Q), model (S, Q))
    pending: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)
    last_origin: int | None = None

    @classmethod
    def empty(cls, n_series: int, n_quantiles: int) -> OnlineScores:
        shape = (len(MODELS), n_series, n_quantiles)
        return cls(np.zeros(shape), np.zeros(shape), np.zeros(shape))

    @classmethod
    def stack(cls, states: list[OnlineScores]) -> OnlineScores:
        """One state for the series of several (same pending origins and quantiles)."""
        first = states[0]
        pending = []
        for i, (origin, _f, _v, _u) in enumerate(first.pending):
            pending.append(
                (
                    origin,
                    np.concatenate([st.pending[i][1] for st in states], axis=1),
                    np.concatenate([st.pending[i][2] for st in states], axis=0),
                    np.concatenate([st.pending[i][3] for st in states], axis=0),
                )
            )
        return cls(
            np.concatenate([st.loss for st in states], axis=1),
            np.concatenate([st.weight for st in states], axis=1),
            np.concatenate([st.log_factor for st in states], axis=1),
            pending,
            first.last_origin,
        )

    def row(self, i: int) -> OnlineScores:
        """The state of series i alone."""
        return OnlineScores(
            self.loss[:, i : i + 1].copy(),
            self.weight[:, i : i + 1].copy(),
            self.log_factor[:, i : i + 1].copy(),
            [(o, f[:, i : i + 1], v[i : i + 1], u[i : i + 1]) for o, f, v, u in self.pending],
            self.last_origin,
        )

    def signature(self) -> tuple[int | None, tuple[int, ...], int]:
        """States with equal signatures can be stacked."""
        return (self.last_origin, tuple(p[0] for p in self.pending), self.loss.shape[2])

    def scores(self) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.where(self.weight > 0, self.loss / np.maximum(self.weight, 1e-300), np.nan)


def online_step(
    state: OnlineScores,
    y: np.ndarray,
    o: int,
    qs: np.ndarray,
    cfg: ForecastConfig,
    m: np.ndarray | None = None,
    base: int = 0,
    pooled: Mapping[int, MissCounts] | None = None,
) -> tuple[Forecast, OnlineScores]:
    """Decide at origin column `o` of `y` (only columns <= o are read): score forecasts
    whose horizon has passed, recalibrate, then forecast with the current best models.

    `m` may be a precomputed `forward_max(y, h)` of a longer array; only columns <= o - h
    of it are read, which depend on y up to column o only. `base` is the absolute grid
    index of column 0 (e.g. floor(time / step)), so a state stays valid when the caller
    passes a sliding window rather than one growing array. `pooled` (origin -> counts)
    replaces the calibration's miss counts over these rows by counts over more rows
    (`calibration_counts` summed over every shard of a fleet), so a fleet streamed by
    shards is calibrated as it would be all at once.
    """
    qs = np.asarray(qs, dtype=np.float64)
    if m is None:
        m = forward_max(y[:, : o + 1], cfg.h)
    loss, weight, g = state.loss, state.weight, state.log_factor
    now_abs = base + o
    if state.last_origin is not None and now_abs > state.last_origin:
        decay = np.exp2(-(now_abs - state.last_origin) * cfg.step / cfg.score_half_life)
        loss = loss * decay
        weight = weight * decay
    still = []
    for origin, f, issued, used in state.pending:
        col = origin - base
        if col < 0:
            continue  # fell out of the window: can no longer be scored
        if col <= o - cfg.h:
            actual = m[None, :, col, None]
            lo = pinball(actual, f, qs)
            ok = np.isfinite(lo)
            # Forecasts scored late are weighted as of their own origin time.
            age_decay = np.exp2(-(now_abs - origin) * cfg.step / cfg.score_half_life)
            loss = loss + np.where(ok, lo, 0.0) * age_decay
            weight = weight + ok * age_decay
            counts = None if pooled is None else pooled[origin]
            g = calibrate(g, actual[0], issued, used, qs, cfg, counts)
        else:
            still.append((origin, f, issued, used))
    new = OnlineScores(loss, weight, g, still, now_abs)
    per_model = all_models(y, m, o, qs, cfg)
    vals, best = _pick(per_model, new.scores())
    vals = _monotone(vals * np.exp(np.take_along_axis(g, best[None], axis=0)[0]), qs)
    new.pending.append((now_abs, per_model, vals, best))
    return Forecast(vals, best, per_model), new


def _monotone(vals: np.ndarray, qs: np.ndarray) -> np.ndarray:
    """Quantiles picked from different models may cross: a higher quantile is never
    below a lower one (running max over the quantiles in increasing order)."""
    if vals.shape[1] < 2:
        return vals
    order = np.argsort(qs)
    filled = np.where(np.isnan(vals[:, order]), -np.inf, vals[:, order])
    mono = np.maximum.accumulate(filled, axis=1)
    out = np.empty_like(vals)
    out[:, order] = np.where(np.isneginf(mono), np.nan, mono)
    return np.where(np.isnan(vals), np.nan, out)


def _pick(per_model: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    best = choose(scores)
    vals = np.take_along_axis(per_model, best[None], axis=0)[0]
    missing = np.isnan(vals)
    if missing.any():
        # The best model has no forecast (e.g. no week of history yet): next best that has.
        alt = choose(np.where(np.isnan(per_model), np.nan, np.where(np.isnan(scores), 0, scores)))
        vals = np.where(missing, np.take_along_axis(per_model, alt[None], axis=0)[0], vals)
        best = np.where(missing, alt, best)
    return vals, best


MissCounts = tuple[np.ndarray, np.ndarray, int]
"""What the calibration of one scored origin reads from its rows: per (model, quantile)
the windows missed and the windows scored among the rows that used the model, and how
many (row, quantile) pairs were scored at all. Sums of counts: exact in any order."""


def miss_counts(
    actual: np.ndarray, issued: np.ndarray, used: np.ndarray, models: int
) -> MissCounts:
    """The `MissCounts` of rows: actual (S, 1), issued and used (S, Q)."""
    ok = np.isfinite(actual) & np.isfinite(issued)
    missed = ok & (actual > issued)
    by_model = [used == k for k in range(models)]
    scored = np.stack([(ok & sel).sum(axis=0) for sel in by_model])
    miss = np.stack([(missed & sel).sum(axis=0) for sel in by_model])
    return miss, scored, int(ok.sum())


def add_counts(a: MissCounts, b: MissCounts) -> MissCounts:
    return a[0] + b[0], a[1] + b[1], a[2] + b[2]


def calibration_counts(
    state: OnlineScores, y: np.ndarray, o: int, cfg: ForecastConfig, base: int = 0
) -> dict[int, MissCounts]:
    """The counts `online_step` (same `state`, `y`, `o`, `base`) calibrates with, per
    pending origin it scores: summed over a fleet's shards, they are its `pooled`."""
    scored = [
        (origin, issued, used)
        for origin, _f, issued, used in state.pending
        if 0 <= origin - base <= o - cfg.h
    ]
    if not scored:
        return {}
    m = forward_max(y[:, : o + 1], cfg.h)
    models = state.log_factor.shape[0]
    return {
        origin: miss_counts(m[:, origin - base, None], issued, used, models)
        for origin, issued, used in scored
    }


def calibrate(
    log_factor: np.ndarray,
    actual: np.ndarray,
    issued: np.ndarray,
    used: np.ndarray,
    qs: np.ndarray,
    cfg: ForecastConfig,
    counts: MissCounts | None = None,
) -> np.ndarray:
    """Adaptive conformal calibration (Gibbs & Candès, 2021) of each model's quantiles.

    Empirical tail quantiles of a few hundred points are biased low (a high quantile of
    past maxima cannot exceed the largest one seen), and by how much depends on the model
    (a one-day window more than an eight-day histogram), so a forecast "q-quantile" is
    exceeded more often than 1 - q. After each realised window, each model's log factor
    moves by gamma x (miss rate - (1 - q)) over the series that used it: its equilibrium
    is a miss rate of exactly 1 - q, whatever the model. Pooled over the series of the
    call: a 1-in-1000 rate cannot be measured on one series within days, but on many.
    `counts`, where given, are those of a larger pool (a whole fleet streamed by shards).
    """
    if counts is None:
        counts = miss_counts(actual, issued, used, log_factor.shape[0])
    miss, scored, pairs = counts
    if pairs == 0:
        return log_factor
    out = log_factor.copy()
    for k in range(log_factor.shape[0]):
        n = scored[k]
        if not n.any():
            continue
        rate = miss[k] / np.maximum(n, 1)
        out[k] += np.where(n > 0, cfg.calibration_rate * (rate - (1.0 - qs)), 0.0)[None, :]
    clipped: np.ndarray = np.clip(out, cfg.calibration_min, cfg.calibration_max)
    return clipped
