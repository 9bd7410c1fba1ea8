"""From the batch's forecasts to one target's suggestion, container by container, in
named steps (architecture §3.1):

1. `has_enough_history`: no autonomous change before `min_lookback_to_scale`;
2. `apply_new_kills`: the OOM floor raised by the kills the state has not seen;
3. `buffer_factor`: the forecast at the row's level plus the mode's buffer;
4. `scheduled_cpu_request` (CPU) or `memory_target` and `heap_rule` (memory);
5. the OOM floor: memory never below it;
6. `bounded_request`: bounds, rounding (`round_up_request`) and limits;
7. `keep_qos`: the pod's QoS class never changes;
8. `significant_changes`: which requests differ beyond hysteresis.

Each step that moves a request records it in the container's `Explanation`
(`recommend.explain`), its reason in words from `recommend.reasons`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from foresize.core.api.quantity import CPU, MEMORY, MIB, round_up_to_unit
from foresize.core.cluster.model import (
    Container,
    ContainerSuggestion,
    ResourceRequirements,
    Suggestion,
)
from foresize.core.cluster.qos import qos_class_of
from foresize.core.cluster.runtime import HeapCeiling
from foresize.core.cluster.target_fields import ResourcePolicy
from foresize.core.forecast.models import TIME_OF_DAY_MODELS
from foresize.core.forecast.select import OnlineScores
from foresize.core.recommend.core import (
    MEMORY_HEADROOM,
    MEMORY_PEAK_WINDOW,
    memory_request,
    recent_peak,
    scheduled_cpu,
)
from foresize.core.recommend.explain import Explanation, amount, duration_words, history_words
from foresize.core.recommend.forecasts import RowForecasts
from foresize.core.recommend.heap import heap_bound_note, heap_floor
from foresize.core.recommend.histories import MODEL_STEP, TO_CANONICAL, ContainerHistory
from foresize.core.recommend.oom import OOMState, apply_ooms
from foresize.core.recommend.params import RESOURCES, RecommendParams
from foresize.core.recommend.reasons import floor_why, forecast_why, schedule_why
from foresize.core.recommend.request import RecommendResult, TargetRequest
from foresize.core.recommend.schedule import Row


@dataclass(slots=True)
class _Outputs:
    """What `finish_target` reports beside the suggestion, container by container."""

    oom_state: dict[str, OOMState] = field(default_factory=dict)
    forecasts: dict[str, dict[str, float]] = field(default_factory=dict)
    models: dict[str, dict[str, str]] = field(default_factory=dict)
    quantiles: dict[str, dict[str, float]] = field(default_factory=dict)
    at_mode: dict[str, float] = field(default_factory=dict)
    changed: dict[str, dict[str, bool]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    non_heap: dict[str, int] = field(default_factory=dict)  # the heap rule's allowance
    steps: dict[str, Explanation] = field(default_factory=dict)


@dataclass(slots=True)
class _Container:
    """One container of the target while it is sized."""

    name: str
    current: ResourceRequirements
    history: ContainerHistory | None
    row: int | None  # its row in the batch's forecasts; None: no history to forecast
    enough: bool  # history of at least `min_lookback_to_scale`
    oom: OOMState
    runtime: HeapCeiling | None
    ex: Explanation = field(default_factory=Explanation)


def finish_target(
    target_index: int,
    request: TargetRequest,
    rows: Sequence[Row],
    forecasts: Mapping[str, RowForecasts],
    now: float,
    forecast_state: dict[str, OnlineScores] | None,
) -> RecommendResult:
    """The result for the target `target_index` of a batch whose `rows` were forecast
    (`forecasts`: resource -> the rows' forecasts)."""
    p = request.params
    suggestion = Suggestion(
        uid=p.uid, created_at=now, window_start=now, window_end=now + p.forecast_blocks
    )
    out = _Outputs()
    row_of = {(t, n): k for k, (t, n) in enumerate(rows)}
    proposed: dict[str, ResourceRequirements] = {}
    enough_all = True
    for name, cur in request.current.items():
        hist = request.histories.get(name)
        k = row_of.get((target_index, name))
        c = _Container(
            name,
            cur,
            hist,
            k,
            has_enough_history(hist, p.min_lookback_to_scale, now),
            (request.oom_state or {}).get(name, OOMState()),
            (request.runtimes or {}).get(name),
        )
        out.steps[name] = c.ex
        enough_all = enough_all and c.enough
        c.oom = apply_new_kills(
            p, c, now, float(forecasts[MEMORY].safest[k]) if k is not None else None
        )
        out.oom_state[name] = c.oom
        proposed[name] = _size_container(p, c, forecasts, now, out)
        out.oom_state[name] = c.oom
    proposed = keep_qos(request.current, proposed, out.steps)
    for name, new in proposed.items():
        out.changed[name] = significant_changes(p, request.current[name], new, out.steps.get(name))
        suggestion.containers[name] = ContainerSuggestion(
            name, dict(new.requests), dict(new.limits)
        )
    return RecommendResult(
        suggestion=suggestion,
        oom_state=out.oom_state,
        has_enough_data=enough_all,
        forecast_state=forecast_state,
        forecasts=out.forecasts,
        models=out.models,
        quantiles=out.quantiles,
        at_mode=out.at_mode,
        changed=out.changed,
        runtime_notes=out.notes,
        non_heap=out.non_heap,
        steps=out.steps,
    )


def has_enough_history(
    history: ContainerHistory | None, min_lookback_to_scale: float, now: float
) -> bool:
    """hasEnoughDataToScale: the oldest sample is at least `min_lookback_to_scale` old."""
    return (
        history is not None
        and history.first_seen is not None
        and now - history.first_seen >= min_lookback_to_scale
    )


def apply_new_kills(
    p: RecommendParams, c: _Container, now: float, safest: float | None
) -> OOMState:
    """The OOM floor (memory): the kills newer than the state has seen, applied."""
    hist = c.history
    if not (p.oom_enabled and hist is not None and hist.oom_times):
        return c.oom
    return apply_ooms(
        c.oom,
        hist.oom_times,
        hist.oom_usage,
        int(c.current.requests.get(MEMORY, 0)),
        now,
        p.stabilization_window,
        safest,
        kill_memory=p.memory_holds()[1],
    )


def _size_container(
    p: RecommendParams,
    c: _Container,
    forecasts: Mapping[str, RowForecasts],
    now: float,
    out: _Outputs,
) -> ResourceRequirements:
    """The container's proposed resources (before `keep_qos`); records what its forecasts
    were in `out`."""
    new = c.current.copy()
    out.forecasts[c.name], out.models[c.name] = {}, {}
    out.changed[c.name], out.quantiles[c.name] = {}, {}
    for res in RESOURCES:
        if c.row is None or c.history is None:
            held = c.current.requests.get(res)
            c.ex.step(
                "history",
                res,
                None if held is None else float(held),
                "no usage history of this container: the request in force stays",
            )
            continue
        peak, span = history_words(
            np.asarray(getattr(c.history, res)) * TO_CANONICAL[res], MODEL_STEP
        )
        c.ex.step("history", res, peak, f"{span}; the highest usage seen {amount(res, peak)}")
        _record(out, c.name, res, forecasts[res], c.row)
        target = _resource_target(p, c, c.row, res, forecasts[res], now, out)
        if target is not None:
            # The OOM floor is raised over the lower bound but the upper bound and an
            # unmanaged limit remain the user's hard ceiling.
            bounded_request(new, c.current, res, target, p.bounds(c.name).for_resource(res), c.ex)
    return new


def _record(out: _Outputs, name: str, res: str, fc: RowForecasts, k: int) -> None:
    """What the forecast of row `k` asked for, which model gave it and at which level."""
    out.forecasts[name][res] = float(fc.value[k])
    out.models[name][res] = str(fc.model[k])
    out.quantiles[name][res] = float(fc.level[k])
    if res == MEMORY and np.isfinite(fc.at_mode[k]):
        out.at_mode[name] = float(fc.at_mode[k])


def _resource_target(
    p: RecommendParams,
    c: _Container,
    k: int,
    res: str,
    fc: RowForecasts,
    now: float,
    out: _Outputs,
) -> float | None:
    """The request `res` should get before bounds and rounding (`k`: the container's
    row); None keeps the current one. Updates the container's memory state (`c.oom`)."""
    value = float(fc.value[k])
    floor = c.oom.active(now) if res == MEMORY else 0
    if not np.isfinite(value) or not c.enough or c.history is None:
        # Not enough history (hasEnoughDataToScale false) or nothing to forecast
        # from: hold the current value, but an OOM floor still raises memory.
        have = c.current.requests.get(res)
        why = (
            "no forecast from this history"
            if c.enough
            else "less than min_lookback_to_scale"
            f" ({duration_words(p.min_lookback_to_scale)}) of history"
        )
        c.ex.step(
            "lookback",
            res,
            None if have is None else float(have),
            f"{why}: the request in force stays",
        )
        if floor and floor > c.current.requests.get(res, 0):
            c.ex.step("oom_floor", res, float(floor), floor_why(c.oom, now))
            return float(floor)
        return None
    c.ex.step("forecast", res, value, forecast_why(p, res, fc, k))
    buffer_percentage = p.model(res).buffer_percentage
    buffer = buffer_factor(buffer_percentage)
    target = value * buffer
    if buffer_percentage:
        c.ex.step("buffer", res, target, f"forecast_buffer_percentage {buffer_percentage:g}%")
    if res == CPU:
        held = c.current.requests.get(res)
        raise_to = target
        target = scheduled_cpu_request(fc, k, buffer, target, held)
        c.ex.step("schedule", CPU, target, schedule_why(target, raise_to, held, fc, k, buffer))
    if res == MEMORY:
        target, c.oom = memory_target(target, c.oom, c.history, p, now, c.ex)
        target = heap_rule(
            target, c.current, c.history, c.runtime, c.name, out.notes, c.ex, out.non_heap
        )
    return c.ex.moved("oom_floor", res, target, max(target, float(floor)), floor_why(c.oom, now))


def buffer_factor(buffer_percentage: float) -> float:
    """What a forecast is multiplied by to add the mode's buffer (given in percent)."""
    return 1.0 + buffer_percentage / 100.0


def scheduled_cpu_request(
    fc: RowForecasts, k: int, buffer: float, target: float, held: float | None
) -> float:
    """THE CPU rule (`scheduled_cpu`) on row `k`: the day segment's request, raised where
    the forecast's median is above it and usage reached the request, a burst met, a raise
    let go, a drop where the forecast is far under it. Without a schedule: the request
    held (`held`), else the forecast `target`."""
    chosen = scheduled_cpu(
        np.array([fc.schedule[k] * buffer]),
        np.array([fc.raise_at[k] * buffer]),
        np.array([target]),
        np.array([float(held) if held is not None else math.nan]),
        np.array([bool(fc.opens[k])]),
        np.array([fc.last_max[k]]),
        np.array([fc.last_min[k]]),
        np.array([fc.remaining[k]]),
        np.array([fc.model[k] in TIME_OF_DAY_MODELS]),
    )[0]
    if np.isfinite(chosen):
        return float(chosen)
    if held is not None:
        return float(held)
    return target


def heap_rule(
    target: float,
    cur: ResourceRequirements,
    hist: ContainerHistory,
    ceiling: HeapCeiling | None,
    name: str,
    notes: dict[str, str],
    ex: Explanation | None = None,
    non_heap: dict[str, int] | None = None,
) -> float:
    """THE heap rule (`recommend.heap`): a memory target never below the container's heap
    ceiling (of the limit in force, which the running heap was sized from) + non-heap.
    The allowance is recorded in `non_heap` (the pod webhook's heap rewrite reads it back
    from `status.runtime_notes`)."""
    if ceiling is None or ceiling.runtime is None:
        return target
    if ceiling.unknown is not None:
        notes[name] = f"{ceiling.runtime} heap ceiling unknown: {ceiling.unknown}"
        return target
    peak = float(recent_peak(np.asarray(hist.memory, dtype=np.float64)[None, :], MODEL_STEP)[0])
    hf = heap_floor(ceiling, cur.limits.get(MEMORY), peak)
    if hf is None:
        notes[name] = f"{ceiling.runtime} heap is a share of the limit, and there is no limit"
        return target
    if non_heap is not None:
        non_heap[name] = hf.non_heap
    text = hf.describe(ceiling)
    bound = heap_bound_note(ceiling, hf, target)
    notes[name] = f"{text}; {bound}" if bound else text
    raised = max(target, float(hf.floor))
    return ex.moved("heap", MEMORY, target, raised, text) if ex is not None else raised


def memory_target(
    target: float,
    st: OOMState,
    hist: ContainerHistory,
    p: RecommendParams,
    now: float,
    ex: Explanation | None = None,
) -> tuple[float, OOMState]:
    """A memory request from its forecast target by THE memory rule
    (`foresize.core.recommend.core.memory_request`, the one the replay scores) on a fleet of
    one: the headroom, the scale-down ratchet over the targets kept in `st.recent`, and
    the recent peak."""
    recent = tuple((t, np.array([v])) for t, v in st.recent)
    parts: dict[str, np.ndarray] = {}
    window = p.memory_holds()[0]
    peak = recent_peak(np.asarray(hist.memory, dtype=np.float64)[None, :], MODEL_STEP)
    value, kept = memory_request(np.array([target]), recent, now, window, peak, parts)
    if ex is not None:
        headroom, held = float(parts["headroom"][0]), float(parts["ratchet"][0])
        ex.step("headroom", MEMORY, headroom, f"+{MEMORY_HEADROOM:.0%} memory headroom")
        ex.moved(
            "ratchet",
            MEMORY,
            headroom,
            held,
            f"memory comes down only to the highest target of the last"
            f" {duration_words(window)} (scale-down stabilization)",
        )
        ex.moved(
            "recent_peak",
            MEMORY,
            held,
            float(value[0]),
            f"never below the highest usage of the last {duration_words(MEMORY_PEAK_WINDOW)}"
            f" ({amount(MEMORY, float(peak[0]))}) + {MEMORY_HEADROOM:.0%}",
        )
    return float(value[0]), replace(st, recent=tuple((t, float(v[0])) for t, v in kept))


def significant_changes(
    p: RecommendParams,
    cur: ResourceRequirements,
    new: ResourceRequirements,
    ex: Explanation | None = None,
) -> dict[str, bool]:
    """Per resource, whether the proposed request is a change worth making (hysteresis).
    A move it holds back is the last step of the resource's explanation: the request
    published stays the one in force (`recommend.suggestions`)."""
    out: dict[str, bool] = {}
    for res in RESOURCES:
        a, b = cur.requests.get(res), new.requests.get(res)
        if a is None or b is None or a == b:
            out[res] = a != b
            continue
        up = b > a
        th = p.scale_up[res] if up else p.scale_down[res]
        out[res] = th.significant(res, a, b)
        if not out[res] and ex is not None:
            amount_of = dict(th.absolute).get(res)
            limit = (
                f"{amount(res, amount_of)}"
                if th.type == "absolute" and amount_of is not None
                else f"{th.percent:g}%"
            )
            ex.step(
                "hysteresis",
                res,
                float(a),
                f"a move to {amount(res, b)} ({(b - a) / a:+.1%}) is under the scale"
                f"{'_up' if up else '_down'} threshold ({limit}): {amount(res, a)} stays",
            )
    return out


def round_up_request(res: str, value: float) -> int:
    """Round up to 1Mi / 1m, ignoring float noise (`api.quantity.round_up_to_unit`)."""
    return round_up_to_unit(res, value)


def bounded_request(
    new: ResourceRequirements,
    cur: ResourceRequirements,
    res: str,
    target: float,
    b: ResourcePolicy | None,
    ex: Explanation | None = None,
) -> None:
    """Bounds, rounding and limits for one resource of one container (in place on `new`);
    each that binds is a step of `ex`."""
    ex = ex if ex is not None else Explanation()
    if res not in cur.requests and res not in cur.limits:
        # No request and no limit: setting one would change the pod's QoS class.
        ex.step(
            "qos",
            res,
            None,
            f"no {res} request or limit: setting one would change the pod's QoS class",
        )
        return
    b = b or ResourcePolicy()
    v = target
    if b.lower is not None:
        v = ex.moved(
            "lower_bound",
            res,
            v,
            max(v, b.lower),
            f"the container's {res} lowerbound {amount(res, b.lower)}",
        )
    if b.upper is not None:
        v = ex.moved(
            "upper_bound",
            res,
            v,
            min(v, b.upper),
            f"the container's {res} upperbound {amount(res, b.upper)}",
        )
    request = round_up_request(res, v)
    ex.moved("round", res, v, request, f"rounded up to {'1m' if res == CPU else '1Mi'}")
    if b.upper is not None:
        request = int(
            ex.moved(
                "upper_bound",
                res,
                request,
                min(request, int(b.upper)),
                f"the container's {res} upperbound {amount(res, b.upper)}",
            )
        )
    limit = cur.limits.get(res)
    if b.limit_ratio is not None and limit is not None:
        # Limits kept proportional: limit = request x ratio (rounded up).
        new.limits[res] = round_up_request(res, request * b.limit_ratio)
        ex.step(
            "limit_ratio",
            res,
            request,
            f"limit {amount(res, new.limits[res])} = request x limit.ratio {b.limit_ratio:g}",
        )
    elif limit is not None and request > limit:
        # Without limit.ratio the limit stays and a request never exceeds it.
        request = int(
            ex.moved(
                "limit",
                res,
                request,
                int(limit),
                f"the {res} limit in force"
                f" {amount(res, limit)} (no limit.ratio: limits are left as"
                " they are, and a request never exceeds its limit)",
            )
        )
    new.requests[res] = request


BURSTABLE_MARGIN = ((CPU, 1), (MEMORY, MIB))
"""How far under its limit `keep_qos` keeps one request of a Burstable pod whose every
request landed on its limit: the smallest step of each resource (1m, 1Mi)."""


def keep_qos(
    current: Mapping[str, ResourceRequirements],
    proposed: dict[str, ResourceRequirements],
    explanations: Mapping[str, Explanation] | None = None,
) -> dict[str, ResourceRequirements]:
    """Never change the pod's QoS class (architecture §3.1; simulator.md, resize validation).
    A request this moves is a step of its container's explanation."""
    before = qos_class_of(Container(n, r) for n, r in current.items())
    after = qos_class_of(Container(n, r) for n, r in proposed.items())
    if before == after:
        return proposed
    steps = explanations or {}
    fixed = {n: r.copy() for n, r in proposed.items()}
    if before == "Guaranteed":
        # Guaranteed needs request == limit everywhere: move limits with requests.
        for r in fixed.values():
            for res in RESOURCES:
                if res in r.requests:
                    r.limits[res] = r.requests[res]
    elif before == "Burstable" and after == "Guaranteed":
        # Every request landed on its limit: keep one request a step under its limit,
        # the smallest change that keeps the pod Burstable.
        for n, r in fixed.items():
            for res, unit in BURSTABLE_MARGIN:
                lim = r.limits.get(res)
                if lim is not None and r.requests.get(res) == lim and lim > unit:
                    r.requests[res] = lim - unit
                    if n in steps:
                        steps[n].step(
                            "qos",
                            res,
                            r.requests[res],
                            "one request kept under its"
                            " limit: every request on its limit would make the"
                            " Burstable pod Guaranteed",
                        )
                    return fixed
    if qos_class_of(Container(n, r) for n, r in fixed.items()) != before:
        kept = {n: r.copy() for n, r in current.items()}
        for n, r in kept.items():
            for res in RESOURCES:
                if (
                    n in steps
                    and res in r.requests
                    and proposed[n].requests.get(res) != r.requests[res]
                ):
                    steps[n].step(
                        "qos",
                        res,
                        r.requests[res],
                        f"the suggestion would change the"
                        f" pod's QoS class ({before}): the requests in force stay",
                    )
        return kept
    return fixed
