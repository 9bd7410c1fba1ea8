"""In-memory usage history on numpy arrays, for the simulator loop and tests.

Layout: one (time, container) matrix per resource. Appending a step for many containers is
one row write (vectorised, no Python loop over containers); reading a window for many
containers at once is one slice plus a max-reduction. Rows form a ring once `retention`
is reached, so memory stays bounded (2,000 containers x 1 week at 1 minute in float32 is
~160 MB for both resources). Same read interface as the SQLite store (`HistoryReader`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from foresize.core.history import OOM, RESOURCES, SeriesKey, check_resource, window_start


class UsageHistory:
    """Usage of many containers at a fixed step, held in memory."""

    def __init__(
        self,
        step: float = 60.0,
        retention: float = 14 * 86400.0,
        *,
        initial_rows: int = 1440,
        initial_columns: int = 64,
        dtype: type = np.float32,
    ) -> None:
        if step <= 0:
            raise ValueError("step must be positive")
        self.step = float(step)
        self.max_rows = max(1, int(round(retention / step)))
        self.dtype = dtype
        self._rows = min(initial_rows, self.max_rows)
        self._cols = max(1, initial_columns)
        self._data: dict[str, np.ndarray] = {
            r: np.full((self._rows, self._cols), np.nan, dtype) for r in RESOURCES
        }
        self._first: int | None = None  # absolute step index of the oldest row kept
        # Absolute step index of the newest row written; meaningful once _first is set.
        self._last = 0
        self.keys: list[SeriesKey] = []
        self._index: dict[SeriesKey, int] = {}
        self._first_seen = np.full(self._cols, np.nan)
        self._events: dict[SeriesKey, list[tuple[float, str, float]]] = {}

    # -- containers --------------------------------------------------------------------

    def indices(self, keys: Sequence[SeriesKey], *, create: bool = True) -> np.ndarray:
        """Column index of each key, registering new keys (unless `create` is False: -1)."""
        out = np.empty(len(keys), dtype=np.int64)
        for i, k in enumerate(keys):
            j = self._index.get(k)
            if j is None:
                if not create:
                    out[i] = -1
                    continue
                j = len(self.keys)
                self.keys.append(k)
                self._index[k] = j
            out[i] = j
        if len(self.keys) > self._cols:
            self._grow_columns(len(self.keys))
        return out

    def _grow_columns(self, need: int) -> None:
        cols = self._cols
        while cols < need:
            cols *= 2
        for r in RESOURCES:
            new: np.ndarray = np.full((self._rows, cols), np.nan, self.dtype)
            new[:, : self._cols] = self._data[r]
            self._data[r] = new
        seen = np.full(cols, np.nan)
        seen[: self._cols] = self._first_seen
        self._first_seen = seen
        self._cols = cols

    def _grow_rows(self, need: int) -> None:
        rows = self._rows
        while rows < need:
            rows = min(rows * 2, self.max_rows)
        if rows == self._rows:
            return
        for r in RESOURCES:
            old = self._data[r]
            new: np.ndarray = np.full((rows, self._cols), np.nan, self.dtype)
            if self._first is not None:
                ks = np.arange(self._first, self._last + 1)
                new[ks % rows] = old[ks % self._rows]
            self._data[r] = new
        self._rows = rows

    # -- writing -----------------------------------------------------------------------

    def append(
        self,
        t: float,
        idx: np.ndarray,
        cpu: np.ndarray | None = None,
        memory: np.ndarray | None = None,
    ) -> None:
        """Record one step at time `t` for the containers `idx` (arrays aligned with idx).

        NaN values are "no sample". A second write into the same step keeps the maximum
        (the history holds the peak of each step). Times must not go back by more than
        the retention.
        """
        k = int(np.floor(t / self.step + 1e-9))
        if self._first is None:
            self._first = self._last = k
        if k > self._last:
            span = k - self._first + 1
            if span > self._rows and self._rows < self.max_rows:
                self._grow_rows(span)
            # Clear rows we move onto (ring reuse, and skipped steps stay gaps).
            for kk in range(self._last + 1, min(k, self._last + self._rows) + 1):
                for r in RESOURCES:
                    self._data[r][kk % self._rows] = np.nan
            self._last = k
            self._first = max(self._first, k - self._rows + 1)
        elif k < self._first:
            raise ValueError(f"sample time {t} is older than the retained history")
        row = k % self._rows
        idx = np.asarray(idx, dtype=np.int64)
        for r, vals in (("cpu", cpu), ("memory", memory)):
            if vals is None:
                continue
            cur = self._data[r][row, idx]
            v: np.ndarray = np.asarray(vals, dtype=self.dtype)
            self._data[r][row, idx] = np.fmax(cur, v)
        have = np.zeros(len(idx), bool)
        for vals in (cpu, memory):
            if vals is not None:
                have |= np.isfinite(np.asarray(vals, dtype=np.float64))
        fresh = idx[have & np.isnan(self._first_seen[idx])]
        self._first_seen[fresh] = float(t)

    def write_poll(
        self, t: float, keys: Sequence[SeriesKey], cpu: np.ndarray, memory: np.ndarray
    ) -> None:
        """One poll of `keys` (`HistoryWriter`): registers new keys, then `append`."""
        self.append(t, self.indices(keys), cpu=cpu, memory=memory)

    def record_event(self, key: SeriesKey, kind: str, t: float, value: float = 0.0) -> None:
        """An OOM kill or a throttling observation (never mixed into usage)."""
        self._events.setdefault(key, []).append((float(t), kind, float(value)))

    # -- reading -----------------------------------------------------------------------

    def _rows_for(self, k0: int, k1: int, cols: np.ndarray, resource: str) -> np.ndarray:
        """Rows for absolute steps [k0, k1) and the given columns: (k1-k0, len(cols))."""
        n = k1 - k0
        out = np.full((n, len(cols)), np.nan, dtype=np.float64)
        if self._first is None or n <= 0:
            return out
        lo, hi = max(k0, self._first), min(k1, self._last + 1)
        if lo >= hi:
            return out
        data = self._data[resource]
        a, b = lo % self._rows, (hi - 1) % self._rows + 1
        # Slices, not fancy indexing, wherever possible: a week of 2,000 containers is
        # 20 million cells and a gather copy of it costs seconds.
        block = data[a:b] if a < b else np.concatenate([data[a:], data[:b]])
        valid = cols >= 0
        vc = cols[valid]
        if vc.size and vc.size == vc[-1] - vc[0] + 1 and (np.diff(vc) == 1).all():
            picked = block[:, vc[0] : vc[-1] + 1]
        else:
            picked = block[:, vc]
        if valid.all():
            out[lo - k0 : hi - k0] = picked
        else:
            out[lo - k0 : hi - k0][:, valid] = picked
        return out

    def series(
        self, key: SeriesKey, resource: str, start: float, end: float
    ) -> tuple[np.ndarray, np.ndarray]:
        check_resource(resource)
        j = self._index.get(key)
        k0 = int(np.ceil(start / self.step - 1e-9))
        k1 = int(np.ceil(end / self.step - 1e-9))
        if j is None or k1 <= k0:
            return np.empty(0), np.empty(0)
        vals = self._rows_for(k0, k1, np.array([j]), resource)[:, 0]
        times = np.arange(k0, k1) * self.step
        return times, vals

    def window(
        self, keys: Sequence[SeriesKey], resource: str, end: float, length: int, step: float
    ) -> np.ndarray:
        check_resource(resource)
        cols = self.indices(keys, create=False)
        return self.window_idx(cols, resource, end, length, step)

    def window_idx(
        self, cols: np.ndarray, resource: str, end: float, length: int, step: float
    ) -> np.ndarray:
        """`window` by column indices (no key lookups; for hot loops)."""
        factor = step / self.step
        if abs(factor - round(factor)) > 1e-9 or factor < 1:
            raise ValueError(f"window step {step} must be a multiple of the store step")
        f = int(round(factor))
        start = window_start(end, length, step)
        k0 = int(round(start / self.step))
        rows = self._rows_for(k0, k0 + length * f, np.asarray(cols, np.int64), resource)
        if f == 1:
            return np.ascontiguousarray(rows.T)
        with np.errstate(invalid="ignore"):
            reduced = np.fmax.reduce(rows.reshape(length, f, len(cols)), axis=1)
        return np.ascontiguousarray(reduced.T)

    def events(
        self, key: SeriesKey, kind: str | None, start: float, end: float
    ) -> list[tuple[float, str, float]]:
        return [
            e
            for e in self._events.get(key, [])
            if start <= e[0] < end and (kind is None or e[1] == kind)
        ]

    def last_oom(self, key: SeriesKey) -> float | None:
        ooms = [e[0] for e in self._events.get(key, []) if e[1] == OOM]
        return max(ooms) if ooms else None

    def first_seen(self, key: SeriesKey) -> float | None:
        j = self._index.get(key)
        if j is None:
            return None
        v = self._first_seen[j]
        return None if np.isnan(v) else v
