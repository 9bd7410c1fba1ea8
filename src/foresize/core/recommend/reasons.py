"""The recommendation's steps in words, for its explanation (`recommend.explain`): which
model and level the forecast used, which branch of THE CPU rule gave the request, what
the OOM floor is."""

from __future__ import annotations

import math

from foresize.core.api.quantity import CPU, MEMORY
from foresize.core.recommend.core import CPU_DROP_FACTOR, CPU_RAISE_SHARE, SCHEDULE_DAYS
from foresize.core.recommend.explain import amount, duration_words
from foresize.core.recommend.forecasts import RowForecasts
from foresize.core.recommend.oom import OOMState
from foresize.core.recommend.params import RecommendParams


def forecast_why(p: RecommendParams, res: str, fc: RowForecasts, k: int) -> str:
    """The forecast step in words: the horizon, the mode's quantile (memory: the level the
    fleet's risk allocation gave), the model chosen by the backtest and its error."""
    m = p.model(res)
    level = float(fc.level[k])
    own = m.quantile(res)
    mode = f"mode {m.mode}" + (f" {m.percentile_value:g}" if m.mode == "percentile" else "")
    at = f"quantile {level:g} ({mode})"
    if res == MEMORY and not math.isclose(level, own):
        at = f"quantile {level:g} (the memory risk allocated across the fleet; {mode} asks {own:g})"
    err = float(fc.error[k])
    scored = (
        f"backtest error {amount(res, err)} (mean pinball loss of its past forecasts)"
        if math.isfinite(err)
        else "not backtested yet (the default model)"
    )
    return (
        f"the forecast of the max over the next {duration_words(p.forecast_blocks)} at {at};"
        f" model {fc.model[k]} chosen by the backtest, {scored}"
    )


def schedule_why(
    target: float,
    raise_to: float,
    held: float | None,
    fc: RowForecasts,
    k: int,
    buffer: float,
) -> str:
    """Which branch of THE CPU rule (`scheduled_cpu`) gave `target`, told from the values it
    chose between (the number itself is the rule's)."""
    level = float(fc.schedule[k]) * buffer
    opens = bool(fc.opens[k])
    last_max = float(fc.last_max[k])

    def same(a: float | None) -> bool:
        return a is not None and math.isfinite(a) and math.isclose(target, a, rel_tol=1e-9)

    segment = (
        f"the day segment's level {amount(CPU, level)} (quantile of these hours' 15-minute"
        f" maxima over the last {SCHEDULE_DAYS} days)"
    )
    if not math.isfinite(level):
        base = "less than a day of history: the forecast stands in for the day schedule"
        return base if same(raise_to) else f"{base}; the request in force stays"
    if same(level):
        return ("a segment of the day starts: " if opens else "") + segment
    if same(held) and not opens:
        if held is not None and held < level:
            return (
                "kept until the next segment of the day starts: mid-segment a request rises"
                " only where the forecast's median is above the segment's level and the"
                f" usage reached the request; {segment}"
            )
        return f"kept until the next segment of the day starts; {segment}"
    if same(raise_to):
        if held is not None and target < held:
            return (
                f"came down to the forecast: the request was over {CPU_DROP_FACTOR:g} times it"
                f" with the last interval under it; {segment}"
            )
        return f"raised to the forecast, above {segment}"
    if same(last_max):
        return (
            f"a burst met at once: every sample of the last interval was over"
            f" {1 / CPU_RAISE_SHARE:g} times the segment's level; raised to its highest sample"
        )
    return f"a raise let go: back to the larger of the forecast and {segment}"


def floor_why(st: OOMState, now: float) -> str:
    """The OOM floor in words."""
    return (
        f"OOM floor {amount(MEMORY, st.floor)} after {st.count} OOM kill"
        f"{'s' if st.count != 1 else ''} (1.2 x the request hit or the usage at the kill,"
        f" compounding), held for {duration_words(max(st.until - now, 0.0))} more"
    )
