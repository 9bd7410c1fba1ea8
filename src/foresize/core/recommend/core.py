"""The recommendation rules, vectorised over many containers (numpy), with no I/O or clock.

From a forecast of the maximum usage over the next horizon to a request:

    request = clamp(quantile(mode) x (1 + buffer), lowerbound, upperbound, existing limit*)
              raised to the OOM floor, rounded up (CPU 1m, memory 1Mi)

(*) without `limit.ratio` limits are left alone and a request never exceeds the limit.

Amounts here are canonical: CPU millicores, memory bytes (floats while computing, ints when
rounded). `foresize.core.recommend.target` applies these rules to one AIScaleTarget.
"""

from __future__ import annotations

import numpy as np

from foresize.core.api.hysteresis import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    Threshold,
    clears,
)
from foresize.core.api.quantity import MEMORY, REQUEST_UNIT, UNIT_NOISE_DIGITS

# Mode -> quantile of the forecast distribution of the max over the horizon, for CPU.
# Read them as "how often may the request be short": at the default 15-minute horizon a
# day has 96 windows, so q = 0.98 means about two short windows a day.
# Memory uses a twentyfold smaller miss probability for the same mode (1 - (1 - q) / 20):
# a CPU request that is exceeded only throttles (the container gets less than it wants,
# for a few seconds of a window), but memory above the limit is an OOM kill that restarts
# the container and loses its work; we weigh one kill like twenty throttled windows.
MODE_CPU_QUANTILES: dict[str, float] = {
    # ~10 short windows a day (memory: one every 2 days). Batch work that tolerates
    # throttling.
    "undershoot": 0.90,
    # ~5 a day (memory: one in 4 days). Favours cost.
    "cost_optimized": 0.95,
    # The default: ~2 a day (memory: one in 10 days) - the same order as a VPA target
    # (p90 of samples x 1.15) is crossed on bursty usage, so "balanced" means as safe as
    # the reference recommender, and cheaper only where the forecast knows better.
    "balanced": 0.98,
    # ~1 a day (memory: one in 20 days). Latency-sensitive services.
    "assurance_optimized": 0.99,
    # ~1 in 10 days (memory: one in 200 days). Almost never short; costs the most.
    "overshoot": 0.999,
}
MEMORY_RISK_DIVISOR = 20.0
"""Memory misses are OOM kills: each mode's miss probability is divided by 20 for memory."""

DEFAULT_MODE = "balanced"


def mode_quantile(mode: str, resource: str, percentile_value: float | None = None) -> float:
    """The quantile of the forecast max that a mode asks for, for `resource`.

    `percentile` uses `percentile_value` (0-100, or 0-1) for both resources as given: the
    user chose the number.
    """
    if mode == "percentile":
        if percentile_value is None:
            raise ValueError("mode percentile needs percentile_value")
        p = float(percentile_value)
        q = p / 100.0 if p > 1.0 else p
        if not 0.0 < q < 1.0:
            raise ValueError(f"percentile_value must be in (0, 100), got {percentile_value}")
        return q
    try:
        q = MODE_CPU_QUANTILES[mode]
    except KeyError as exc:
        raise ValueError(f"unknown mode {mode!r}") from exc
    if resource == MEMORY:
        return 1.0 - (1.0 - q) / MEMORY_RISK_DIVISOR
    return q


MEMORY_RISK_LEVELS: tuple[float, ...] = tuple(
    sorted(1.0 - (1.0 - q) / MEMORY_RISK_DIVISOR for q in MODE_CPU_QUANTILES.values())
)
"""The memory quantiles of the named modes, cheapest first (0.995 ... 0.99995): the levels
between which the memory risk of a named mode is allocated (`allocate_risk`). No container
is ever sized below the cheapest named level nor above the safest."""

RISK_PRICE = 0.25
"""The price of memory risk in `allocate_risk`, as a share of the fleet's average request.

A container moves from its mode's miss probability p to p' when the memory that frees is
more than RISK_PRICE x (average request) x (p' - p) / p. Read at the default mode: a
container goes down to the cheapest level (5 times the misses) only when that frees at
least one average container's request (0.25 x 4 = 1), and up to the safest level (1/20 of
the misses) whenever that costs less than about a quarter of one. The value is a round
number inside the range where the trade is a gain on both axes; `docs/recommender.md`
shows the results for half and twice this price."""


def risk_levels(
    mode: str, resource: str, percentile_value: float | None = None
) -> tuple[float, ...]:
    """The quantiles a container of `mode` may be sized at: every named memory level for
    memory under a named mode (the risk is allocated across the fleet), else the mode's
    own quantile (CPU, and `percentile`, where the user chose the number)."""
    if resource == MEMORY and mode != "percentile":
        mode_quantile(mode, resource)  # validates the mode
        return MEMORY_RISK_LEVELS
    return (mode_quantile(mode, resource, percentile_value),)


SCHEDULE_BLOCKS = 3
"""The scheduled CPU request (`scheduled_cpu`) changes at most at the starts of 3
segments a day, plus raises. Why: 4 resizes a series-day is what a fleet of 10,000
containers can afford (API writes, Events, restarts where in-place resize is not
available); a request that follows every forecast changed 12-28 times a series-day on the
development traces. Three segments leave room for raises within the budget. Each
container's day is cut where its own daily profile says (`SCHEDULE_SLOT`), so three
segments can hold a night, a ramp and a peak wherever they fall; even knowing the future,
a request fixed per 8-hour block from midnight keeps 0.75 of vpa's slack at vpa's
shortfall on the most diurnal development set, cut per series 0.62 (docs/recommender.md)."""
SCHEDULE_SLOT = 3600.0
"""Segments start on the hour, cut per container (`forecast.models.day_schedule`): the
day's profile is the mode's quantile of each hour's 15-minute maxima on the last
`SCHEDULE_DAYS` days, and the three segments are the cut of the cyclic day that reserves
least above that profile when each segment holds its peak. Why per container: daily
cycles peak at different hours (users' time zones, batch windows), and boundaries fixed at
midnight, 08:00 and 16:00 cut through ramps, holding a peak level for hours of quiet.
Why an hour: finer slots would follow the noise of a week of history (an hour pools 70
windows over 7 days) and the cut is searched over every choice of 3 starts among the
slots (2,024 at 24 slots)."""
SCHEDULE_DAYS = 7
"""A segment's request is the quantile over the same hours of the last 7 days: a full
week, so a weekly pattern (quiet weekends) cannot leave a working day short, and at
8-hour segments about 650 windows, enough for a 0.98-0.99 quantile to be an estimate
rather than the maximum seen. Level shifts up are met by the raise (CPU_RAISE_QUANTILE)
at once; down, the segment lets go within the week."""
CPU_RAISE_QUANTILE = 0.5
"""Within a segment the request is raised (to the 15-minute forecast at the mode's quantile)
when the forecast's median is above both the segment's schedule and the request in force:
the container would be short more often than not, a level the last week at this time of
day has not shown (a level shift, a new daily peak). Raises are the point of forecasting;
only downsizes wait for the next segment. The median is scale free and the same for every
mode."""
CPU_RAISE_SHARE = 0.4
"""A request in force below 40% of the 15-minute forecast at the mode's quantile is raised
whatever the schedule: the forecast sees a peak coming (a daily spike a time-of-day
model knows, shorter than a segment) that would run the container at under half the CPU
it wants; upsizes ahead of recurring peaks are the point of forecasting. Unit free; a
smaller gap waits for the median rule or the next segment. Shares of 0.25 and 0.4 gave the
same changes on the most diurnal development set (3.94 a series-day), 0.5 gave 4.02:
each such raise is a resize, so only a gap of more than a factor 2.5 is worth one.
The same gap the other way lets a raise go before its segment ends: a request more than
2.5 times the schedule, with the forecast back under the schedule, returns to it (the
burst is over; bursty VMs otherwise hold a burst's raise for the rest of an up to 16-hour
segment). Matched CPU ratio without the let-go / with factors 4, 2.5, 2 / with any raise
let go: Azure 0.981 / 0.973, 0.965, 0.964 / 0.957; Crane's first half 0.681 / 0.671,
0.659, 0.655 / 0.637 (default changes 3.78 up to factor 2, 4.26 with any raise let go);
every third Bitbrains VM 0.610 / -, 0.456, - (docs/recommender.md). The same factor 2.5
reads the last interval (`scheduled_cpu`): an interval spent entirely over 2.5 times the
schedule is a burst met at once, and a raise 2.5 times over the forecast, with usage under
the schedule, is let go."""


CPU_DROP_FACTOR = 4.0
"""Mid-segment, a request more than 4 times the 15-minute forecast at the mode's quantile,
with every sample of the last interval under that forecast, comes down to the forecast,
even below the schedule (`scheduled_cpu`): the time of day's history (the schedule) holds a
level the present does not show (a quiet day of a VM that bursts at random hours: a
segment's quantile over 7 days holds the bursts of other days at those hours). Why 4 and
not the raise's 2.5 (`CPU_RAISE_SHARE`): a drop is a resize that a diurnal container pays
again at the next segment (its forecast falls 2.5 times under a segment's peak on evening
ramps); a factor 4 is rare on a daily cycle and common on bursty VMs. The whole rule with
factors 3 / 4 / 5, matched CPU ratio: Azure 0.913 / 0.916 / 0.918, Crane 0.642 at each (its
first half 3.93 / 3.70 / 3.70 changes a series-day; without the time-of-day exemption
below, factor 3 took Crane to 0.684), every third Bitbrains VM 0.328 / 0.340 / 0.344
(docs/recommender.md, "What the last interval says")."""
CPU_DROP_HOURS = 4 * 3600.0
"""A drop below the schedule needs at least 4 hours left before the next segment starts
(`DaySchedule.remaining`): the next segment resets the request anyway, so a drop worth a
resize must save slack for hours, not minutes: 4 hours is half of the 8-hour segment an
even cut of the day into SCHEDULE_BLOCKS gives (a drop in the first half of a typical
segment). With 2 / 4 / 6 hours: Azure 0.913 / 0.916 /
0.920, Crane's first half 3.74 / 3.70 / 3.70 changes a series-day (4.22 at 2 hours without
the time-of-day exemption), every third Bitbrains VM 0.312 / 0.340 / 0.376."""


def interval_range(last: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of `last` (containers x the samples of the last decision interval), the
    highest and the lowest known sample, NaN where none is known: `scheduled_cpu`'s
    `last_max` and `last_min`, read alike by the operator and the replay."""
    known = np.isfinite(last)
    seen = known.any(axis=1)
    hi = np.max(np.where(known, last, -np.inf), axis=1, initial=-np.inf)
    lo = np.min(np.where(known, last, np.inf), axis=1, initial=np.inf)
    return np.where(seen, hi, np.nan), np.where(seen, lo, np.nan)


def scheduled_cpu(
    schedule: np.ndarray,
    raise_at: np.ndarray,
    raise_to: np.ndarray,
    current: np.ndarray,
    block_start: bool | np.ndarray,
    last_max: np.ndarray | None = None,
    last_min: np.ndarray | None = None,
    remaining: np.ndarray | None = None,
    seasonal: np.ndarray | None = None,
) -> np.ndarray:
    """THE CPU rule, vectorised: the target per container (NaN = keep the request in force).

    schedule: the request of the container's segment of the day
    (`foresize.core.forecast.models.day_schedule`), NaN before a day of history. raise_at /
    raise_to: the 15-minute forecast at CPU_RAISE_QUANTILE and at the mode's quantile.
    current: the request in force (NaN or 0 = none). block_start: per container (or one
    for all), this decision is the first of its segment (`DaySchedule.at`).

    At a segment's start the request moves to the schedule; at any time, where the
    forecast at the raise quantile is above both the schedule and the request in force, or
    the request is below CPU_RAISE_SHARE of `raise_to`, it moves to `raise_to`; where the
    schedule is below CPU_RAISE_SHARE of the request (a raise of more than a factor 2.5)
    and `raise_to` is back under the schedule, it returns to the schedule (the burst is
    over: holding it to the segment's end reserves it for hours); otherwise it is kept
    until the next segment. Without a schedule (less than a day of history) the
    forecast `raise_to` stands in for it.

    What the container did since the last decision (`last_max`, `last_min`: the highest
    and lowest usage sample of the last interval, NaN = unknown) refines this, where given
    (`seasonal`: the forecast at the mode's quantile is from a time-of-day model,
    `forecast.models.TIME_OF_DAY_MODELS`):
    - a raise needs usage: mid-segment, no raise while every sample of the last interval
      stayed under the request in force (the forecast's signal then comes from older
      history, and on bursty containers it raises for bursts that are over), except a
      raise of a request under CPU_RAISE_SHARE of a seasonal forecast (a recurring peak
      anticipated);
    - a burst is met at once: where every sample of the last interval is more than
      1 / CPU_RAISE_SHARE times the schedule and the highest is above the request, the
      request rises to that highest sample (a level sustained over a whole interval
      lasts: on the Azure VMs the next interval is a burst too in 79% of such cases);
    - a segment start under a seasonal forecast more than 1 / CPU_RAISE_SHARE times the
      segment's level goes to that forecast, not to the level: the raise above would take
      the level back at the next decision (after a daily spike the forecast,
      pooled over +-30 minutes of past days, still sees the spike for 30 minutes after the
      segment holding it ended; the request fell at 13:00 and rose back at 13:15);
    - a raise is let go when the forecast at the mode's quantile is 1 / CPU_RAISE_SHARE
      times under it and the last interval stayed under the schedule (under a seasonal
      forecast: at or under the level it returns to, the peak it anticipated has passed):
      back to the larger of the schedule and that forecast;
    - a drop: a request more than CPU_DROP_FACTOR times that forecast, with every sample
      of the last interval under it and at least CPU_DROP_HOURS before the next segment
      (`remaining`, seconds), comes down to the forecast, below the schedule. The drop
      does not follow a seasonal forecast (it speaks for this hour: following its lows
      below the schedule within a segment is the schedule's job)."""
    sched = np.asarray(schedule, dtype=np.float64)
    cur = np.asarray(current, dtype=np.float64)
    have = np.isfinite(cur) & (cur > 0)
    level = np.where(np.isfinite(sched), sched, 0.0)
    block_start = np.asarray(block_start, dtype=bool)
    level = np.where(~block_start & have, np.fmax(level, np.where(have, cur, 0.0)), level)
    to = np.asarray(raise_to, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        up = np.asarray(raise_at, dtype=np.float64) > level
        ahead = have & (np.where(have, cur, 0.0) < CPU_RAISE_SHARE * to)
        up |= ahead
    base = np.where(block_start, sched, np.where(have, np.nan, sched))
    with np.errstate(invalid="ignore"):
        # A raise let go: the request in force is more than 1 / CPU_RAISE_SHARE times the
        # schedule and the forecast at the mode's quantile is back under the schedule.
        done = have & (sched < CPU_RAISE_SHARE * np.where(have, cur, 0.0)) & (to < sched)
    base = np.where(done, sched, base)
    out = np.where(up, to, base)
    out = np.where(~np.isfinite(sched) & ~have, to, out)
    if last_max is None:
        return out
    hi = np.asarray(last_max, dtype=np.float64)
    lo = np.asarray(last_min if last_min is not None else np.full_like(hi, np.nan), np.float64)
    in_force = np.where(have, cur, np.nan)
    with np.errstate(invalid="ignore"):
        # A raise needs usage: none mid-segment while the last interval stayed under the
        # request in force (NaN compares False: unknown usage never blocks a raise).
        known = np.asarray(seasonal, dtype=bool) if seasonal is not None else np.zeros_like(have)
        quiet = have & np.isfinite(sched) & (hi < in_force) & ~block_start & ~(ahead & known)
        out = np.where(quiet & (out > in_force), np.nan, out)
        # A segment start under a time-of-day forecast: where the segment's level is under
        # CPU_RAISE_SHARE of that forecast, the raise above would take the segment's
        # request back at the next decision without usage, so the request goes to the
        # forecast now (after a daily spike the forecast, pooled over +-30 minutes of past
        # days, still sees the spike for 30 minutes after the segment holding it ended; a
        # drop at the segment's end and a raise 15 minutes later are two resizes, and the
        # raise was then held to the next segment).
        anticipated = known & block_start & have & np.isfinite(hi) & (sched < CPU_RAISE_SHARE * to)
        out = np.where(anticipated, np.fmax(out, to), out)
        rising = np.isfinite(out) & (out > in_force)
        # A drop: the request in force (or the target) is CPU_DROP_FACTOR times the
        # forecast, the last interval stayed under the forecast, hours remain.
        held = np.where(np.isfinite(out), out, in_force)
        left = np.asarray(remaining, np.float64) if remaining is not None else np.zeros_like(hi)
        drop = (
            have
            & ~rising
            & ~known
            & (held > CPU_DROP_FACTOR * to)
            & (hi < to)
            & (left >= CPU_DROP_HOURS)
        )
        out = np.where(drop, to, out)
        # A raise let go: above the schedule and 1 / CPU_RAISE_SHARE times the forecast,
        # the last interval under the schedule: back to the schedule (or the forecast).
        # Under a time-of-day forecast, which speaks for this hour, the last interval under
        # the level it returns to is enough: the peak its raise anticipated has passed.
        held = np.where(np.isfinite(out), out, in_force)
        calm = np.where(known, hi <= np.fmax(sched, to), hi < sched)
        back = have & ~rising & ~drop & (held > sched) & (CPU_RAISE_SHARE * held > to) & calm
        out = np.where(back, np.fmax(sched, to), out)
        # A burst met at once: every sample of the last interval over 1 / CPU_RAISE_SHARE
        # times the schedule, the highest above what would be in force.
        held = np.where(np.isfinite(out), out, np.where(have, cur, 0.0))
        burst = have & (CPU_RAISE_SHARE * lo > sched) & (hi > held)
        out = np.where(burst, np.fmax(hi, np.where(np.isfinite(out), out, 0.0)), out)
    return out


MEMORY_HEADROOM = 0.10
"""Memory forecasts (and the recent peak below) are raised by 10% (after the risk
allocation, which is scale free, so this changes no level). Why: a memory level of 0.999
or more asks for a miss once in thousands of windows, more than 14 days of history can
resolve; every estimator then saturates at the highest value seen, and a working set
that grows (caches, heaps, leaks) or steps up beats its old high by a little: the kills
of steadily growing containers on the development sets were 0.4-9% above the request.
10% covers that drift with a margin, two thirds of VPA's own 15%. 0 and 5% left the
unseen fleet killed more often than under VPA (docs/recommender.md)."""
MEMORY_PEAK_WINDOW = 3 * 86400.0
"""A memory request is never below the highest usage of the last 3 days. Why: level
shifts come back: a peak reached in the last days is a level the container has shown it
needs (a nightly job, a weekly report's build-up), and the forecast's one-day models
forget it after a day. Three days, the forecast's own error memory (`score_half_life`),
is long enough to span a weekend lull and short enough to release a one-off peak within
the week; 1 and 7 days are compared in docs/recommender.md."""
KILL_MEMORY = 3 * 86400.0
"""An OOM floor holds at least 3 days (longer if the stabilization window is). Why: what
a kill teaches is that this container's demand goes beyond what its history forecast, and
kills recur at the same phase of its cycle (the next day's batch, the next burst): a
floor held only an hour is released before the next episode, so the same container is
killed again (on the development sets the repeat kills came 1.4-2 days apart). Three
days is the forecast's error memory (`score_half_life`), after which it has seen the
episode in its own history; 1 and 7 days are compared in docs/recommender.md. This is the
default mode's kill memory; other modes scale it (`memory_holds`)."""


def allocate_risk(
    values: np.ndarray,
    levels: np.ndarray,
    mode_q: np.ndarray,
    price: float = RISK_PRICE,
    reference: float | None = None,
) -> np.ndarray:
    """Per row, the index into `levels` to size at: memory risk goes where it saves most.

    values (S, L): each row's forecast at each quantile of `levels` (ascending; NaN where
    that level is not allowed for the row). mode_q (S,): each row's own mode quantile (one
    of `levels`). A uniform quantile gives every container the same miss probability, but
    protecting a container costs very different amounts: a flat series pays a few percent
    for ten times fewer misses, a bursty one (idle at 0.3 GiB, bursts to 20 GiB) pays the
    whole burst. Each row picks the level minimising

        value(level) + price x reference x (1 - level) / (1 - mode_q)

    where reference is the mean of the rows' forecasts at their mode's level (what uniform
    sizing would reserve for an average container of the fleet), or the `reference` given
    (a caller that recommends its fleet in parts keeps the whole fleet's mean). A row
    whose coverage costs about the fleet's average stays at its mode; cheap ones buy
    safety, and only containers whose protection costs more than the fleet's average
    container take more risk. Scale free: multiplying every value by a constant changes
    nothing.
    """
    values = np.asarray(values, dtype=np.float64)
    levels = np.asarray(levels, dtype=np.float64)
    mode_q = np.asarray(mode_q, dtype=np.float64)
    own = np.argmin(np.abs(levels[None, :] - mode_q[:, None]), axis=1)
    at_mode = values[np.arange(len(own)), own]
    if reference is None or not np.isfinite(reference) or reference <= 0:
        if not np.isfinite(at_mode).any():
            return np.asarray(own, dtype=np.int64)
        reference = float(np.nanmean(at_mode))
    penalty = price * reference * (1.0 - levels)[None, :] / (1.0 - mode_q)[:, None]
    cost = np.where(np.isfinite(values), values + penalty, np.inf)
    best = np.argmin(cost, axis=1)
    return np.asarray(np.where(np.isfinite(cost).any(axis=1), best, own), dtype=np.int64)


def round_up(resource: str, values: np.ndarray) -> np.ndarray:
    """Round requests up to the resource's granularity (CPU 1m, memory 1Mi), float noise
    ignored: the rule of `api.quantity.round_up_to_unit`, over arrays."""
    unit = REQUEST_UNIT[resource]
    v = np.asarray(values, dtype=np.float64)
    return np.ceil(np.round(v / unit, UNIT_NOISE_DIGITS[resource])) * unit


def passes_hysteresis(
    current: np.ndarray,
    target: np.ndarray,
    up: Threshold = DEFAULT_SCALE_UP,
    down: Threshold = DEFAULT_SCALE_DOWN,
    resource: str = "cpu",
) -> np.ndarray:
    """True where moving `resource` from `current` to `target` is a change worth making;
    the thresholds are the API's one `Threshold` (`api.hysteresis`).

    No current value (NaN) always passes: there is nothing to keep. From 0, any change
    clears a percent threshold (a percent of nothing is nothing) but an absolute one still
    needs its amount, as `api.hysteresis.Threshold.significant` decides.
    """
    cur = np.asarray(current, dtype=np.float64)
    tgt = np.asarray(target, dtype=np.float64)
    delta = tgt - cur
    fresh = ~np.isfinite(cur) | ((cur <= 0) & (up.type != "absolute"))

    def big(th: Threshold, d: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            amount = dict(th.absolute).get(resource)
            return np.asarray(clears(th.type, th.percent, amount, np.abs(cur), d))

    ok = np.where(delta > 0, big(up, delta), np.where(delta < 0, big(down, -delta), False))
    return (fresh & np.isfinite(tgt)) | (ok & np.isfinite(tgt))


# --- OOM remediation (the hold; the rule itself is `recommend.oom.oom_bump`) ------------

DEFAULT_STABILIZATION = 3600.0
"""docs/api.md: stabilization_window default max(forecast_interval, 1h)."""
DEFAULT_MEMORY_STABILIZATION = 6 * 3600.0
"""Memory scale-down stabilization (a ratchet): memory goes up at once but down only to
the highest memory target of the last 6 hours (or of the OOM stabilization window when
that is longer). Why: working sets come back. Bursty memory (batch runs, caches, daily
jobs) has lulls of hours between bursts within a working day; a request released in such
a lull is hit by the next burst, and an OOM kill costs far more than hours of slack (CPU,
whose excess only throttles, follows the forecast down at once). A quarter of a day covers
the lulls within one working period without holding yesterday's peak all day (a 24-hour
hold, tried, costs more slack than it saves kills). Measured on Bitbrains, the 1 h
window's OOM kills came within 6 h of a downsize half the time (VPA's: 8%); 3 h and 6 h
lie on the same better trade-off curve, 12 h on a worse one (docs/recommender.md). This is
the default mode's hold; other modes scale it (`memory_holds`)."""
MEMORY_HOLD_MAX = 14 * 86400.0
"""No memory hold (ratchet, kill memory) is longer than the 14 days of history a
recommendation reads: a level older than that is not known any more."""


def memory_holds(quantile: float) -> tuple[float, float]:
    """How long memory remembers a level at a mode's memory quantile: (the scale-down
    ratchet's window, the kill memory), both in seconds.

    The user's risk posture governs the holds, not only the forecast's quantile: both are
    the default mode's values (DEFAULT_MEMORY_STABILIZATION, KILL_MEMORY) scaled by the
    ratio of the default's miss probability to this one's, (1 - q_default) / (1 - q), up
    to MEMORY_HOLD_MAX. Why this form: a hold of N windows misses when a level it let go
    of comes back; for a container whose episodes recur at random the chance that the next
    window beats the highest of the last N is 1 / (N + 1) (the record probability of an
    exchangeable sequence), so a hold that keeps the miss rate in proportion to the mode's
    must scale as 1 / (1 - q). The form has no new constant; the default keeps the values
    measured for it, undershoot (five times the misses) holds 1.2 h and 0.6 days,
    overshoot (a twentieth) 5 and 14 days. Measured in docs/recommender.md; the recent
    peak and the headroom are not scaled (the same measurement: scaling them too left
    growing jobs killed more often at every quantile).
    """
    q = float(quantile)
    if not 0.0 < q < 1.0:
        raise ValueError(f"memory quantile must be in (0, 1), got {quantile}")
    scale = (1.0 - mode_quantile(DEFAULT_MODE, MEMORY)) / (1.0 - q)
    return (
        min(DEFAULT_MEMORY_STABILIZATION * scale, MEMORY_HOLD_MAX),
        min(KILL_MEMORY * scale, MEMORY_HOLD_MAX),
    )


RecentTargets = tuple[tuple[float, np.ndarray], ...]
"""The memory targets of the ratchet's window: (decision time, target per container)."""


def memory_request(
    forecast: np.ndarray,
    recent: RecentTargets,
    now: float,
    window: float,
    peak: np.ndarray,
    parts: dict[str, np.ndarray] | None = None,
) -> tuple[np.ndarray, RecentTargets]:
    """THE memory rule after the forecast, vectorised (the operator applies it to one
    container through `foresize.core.recommend.target`, the replay to the whole fleet):

    1. the headroom: forecast x (1 + MEMORY_HEADROOM);
    2. the scale-down ratchet: the highest such target of the last `window` seconds (this
       one included; `window` <= 0 turns it off), `recent` being the targets kept so far;
    3. the recent peak: never below `peak` (each row's highest usage over the last
       MEMORY_PEAK_WINDOW, from `recent_peak`) x (1 + MEMORY_HEADROOM).

    NaN forecasts (not enough history) stay NaN. Returns the target per container and the
    targets to keep for the next call. The OOM floor comes on top (`oom_bump`). `parts`,
    where given, receives the value after each of the three ("headroom", "ratchet",
    "recent_peak"): the operator's explanation of the request (`recommend.explain`)."""
    target = np.asarray(forecast, dtype=np.float64) * (1.0 + MEMORY_HEADROOM)
    if parts is not None:
        parts["headroom"] = target
    kept: RecentTargets = ()
    if window > 0:
        kept = (*((t, v) for t, v in recent if now - window < t <= now), (now, target))
        with np.errstate(invalid="ignore"):
            held = np.fmax.reduce(np.stack([v for _, v in kept]), axis=0)
        target = np.where(np.isfinite(target), held, target)
    if parts is not None:
        parts["ratchet"] = target
    floor = np.asarray(peak, dtype=np.float64) * (1.0 + MEMORY_HEADROOM)
    out = np.where(np.isfinite(target), np.fmax(target, floor), target)
    if parts is not None:
        parts["recent_peak"] = out
    return out, kept


def recent_peak(memory: np.ndarray, step: float) -> np.ndarray:
    """Per row of `memory` (containers x samples on a grid of `step` seconds, the last
    column now), the highest usage of the last MEMORY_PEAK_WINDOW (NaN without a sample)."""
    y = np.atleast_2d(np.asarray(memory, dtype=np.float64))
    span = int(MEMORY_PEAK_WINDOW / step)
    if span <= 0 or y.shape[1] == 0:
        return np.full(y.shape[0], np.nan)
    recent = y[:, -span:]
    have: np.ndarray = np.asarray(np.isfinite(recent).any(axis=1))
    out = np.where(have, np.nanmax(np.where(have[:, None], recent, 0.0), axis=1), np.nan)
    return np.asarray(out, dtype=np.float64)
