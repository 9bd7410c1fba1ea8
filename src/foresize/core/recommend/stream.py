"""Recommending a fleet in bounded memory: by shards of series (issue 26).

`recommend_stream(items, load, size, now)` recommends every item (a target due this
round) the way one `recommend_batch` of them all would, but holds the histories of one
shard at a time: items are cut into shards of at most `SERIES_SHARD` containers, each
shard's requests are built by `load` (which reads their history), recommended and handed
back before the next shard is loaded. The operator and the simulator both recommend
through it (`recommend.suggestions.plan_suggestions`, the pass both shells run).

A batch couples its rows in two ways, and a shard alone would not see the rest of the
fleet: the memory risk allocation prices every container against the fleet's mean memory
forecast at its mode's level, and the forecasts' calibration pools the miss counts of
every row whose state lines up (and the rows of one group share one history matrix,
whose width the decaying histogram's column blocks follow). So with more than one shard,
a first pass over the shards sums what couples them (`FleetTotals`), a second one (when
no reference is given) takes the fleet's mean memory forecast, and the last one
recommends each shard with them: the results are those of one batch, number for number.
Each pass reads the shard's history again: memory is bounded at the price of reading the
history two or three times on rounds of more than one shard.

Each item may carry several pools of requests (`load` returns one list a pool, e.g. a
target's own request and its shadow policies'): a pool is one batch of its own (its own
totals and reference), as separate `recommend_batch` calls of each pool would be.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

import numpy as np

from foresize.core.api.quantity import MEMORY
from foresize.core.forecast.select import SERIES_SHARD, OnlineScores
from foresize.core.recommend.forecasts import FleetTotals, forecast_rows
from foresize.core.recommend.request import RecommendResult, TargetRequest
from foresize.core.recommend.target import batch_rows, recommend_batch, resolve_requests

T = TypeVar("T")
M = TypeVar("M")

Loaded = tuple[M, tuple[list[TargetRequest], ...]]
"""What `load` returns for an item: whatever the caller wants back, and the requests of
each pool."""


def shards(items: Sequence[T], size: Callable[[T], int], limit: int) -> list[range]:
    """Consecutive runs of items whose sizes (containers) sum to at most `limit` (an item
    larger than `limit` is a shard of its own)."""
    out: list[range] = []
    start, total = 0, 0
    for i, item in enumerate(items):
        n = max(1, size(item))
        if i > start and total + n > limit:
            out.append(range(start, i))
            start, total = i, 0
        total += n
    if start < len(items):
        out.append(range(start, len(items)))
    return out


def recommend_stream(
    items: Sequence[T],
    load: Callable[[T], Loaded[M]],
    size: Callable[[T], int],
    now: float,
    *,
    memory_reference: float | None = None,
    limit: int | None = None,
) -> Iterator[tuple[T, M, tuple[list[TargetRequest], ...], tuple[list[RecommendResult], ...]]]:
    """Per item, in order: (item, what `load` gave, its requests and its results, a list a
    pool), a shard at a time. `load` is called once per item and pass, before any of the
    item's shard is handed back; `size` is an item's containers (its rows, at most).
    `limit`: containers a shard (`SERIES_SHARD` by default)."""
    cuts = shards(items, size, SERIES_SHARD if limit is None else limit)
    fleets: list[FleetTotals | None] = []
    references: list[float | None] = []
    if len(cuts) > 1:
        fleets, references = _fleet_totals(items, load, cuts, now, memory_reference)
    for cut in cuts:
        loaded = [load(items[i]) for i in cut]
        pools = len(loaded[0][1]) if loaded else 0
        per_pool: list[list[list[RecommendResult]]] = []
        for p in range(pools):
            reqs = [r for _meta, item_pools in loaded for r in item_pools[p]]
            fleet = fleets[p] if fleets else None
            reference = references[p] if references else memory_reference
            results = (
                recommend_batch(reqs, now, memory_reference=reference, fleet=fleet) if reqs else []
            )
            per_pool.append(_split(results, [len(item_pools[p]) for _m, item_pools in loaded]))
        for j, i in enumerate(cut):
            meta, item_pools = loaded[j]
            yield items[i], meta, item_pools, tuple(per_pool[p][j] for p in range(pools))
        del loaded, per_pool


def _split(results: list[RecommendResult], counts: list[int]) -> list[list[RecommendResult]]:
    out, at = [], 0
    for n in counts:
        out.append(results[at : at + n])
        at += n
    return out


def _fleet_totals(
    items: Sequence[T],
    load: Callable[[T], Loaded[M]],
    cuts: list[range],
    now: float,
    memory_reference: float | None,
) -> tuple[list[FleetTotals | None], list[float | None]]:
    """Per pool, the totals that couple its rows over every shard, and the memory
    reference each is priced against (the fleet's mean where none is given)."""
    fleets: list[FleetTotals | None] = []
    for cut in cuts:
        for p, reqs in enumerate(_pools(items, load, cut)):
            while len(fleets) <= p:
                fleets.append(FleetTotals())
            resolved = resolve_requests(reqs)
            totals = fleets[p]
            assert totals is not None
            totals.add(resolved, batch_rows(resolved), now)
    if memory_reference is not None and math.isfinite(memory_reference) and memory_reference > 0:
        return fleets, [memory_reference] * len(fleets)
    # No usable reference: one batch would price against its own mean (`allocate_risk`).
    # The fleet's forecasts at the mode's memory level, in row order: their mean is what
    # `allocate_risk` takes from one batch of them all.
    at_mode: list[list[np.ndarray]] = [[] for _ in fleets]
    for cut in cuts:
        for p, reqs in enumerate(_pools(items, load, cut)):
            resolved = resolve_requests(reqs)
            rows = batch_rows(resolved)
            scratch: list[dict[str, OnlineScores] | None] = [{} for _ in resolved]
            fc = forecast_rows(resolved, rows, MEMORY, scratch, now, fleet=fleets[p])
            at_mode[p].append(fc.at_mode)
    references: list[float | None] = []
    for values in at_mode:
        joined = np.concatenate(values) if values else np.zeros(0)
        finite = bool(np.isfinite(joined).any())
        references.append(float(np.nanmean(joined)) if finite else None)
    return fleets, references


def _pools(
    items: Sequence[T], load: Callable[[T], Loaded[M]], cut: range
) -> list[list[TargetRequest]]:
    """The requests of one shard, a list a pool."""
    loaded = [load(items[i])[1] for i in cut]
    pools = len(loaded[0]) if loaded else 0
    return [[r for item_pools in loaded for r in item_pools[p]] for p in range(pools)]
