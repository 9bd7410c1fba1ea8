"""Prometheus remote write (protocol 1.0): samples as a snappy-compressed protobuf
`WriteRequest`, what Prometheus (`--web.enable-remote-write-receiver`, `/api/v1/write`),
VictoriaMetrics (`/api/v1/write`), Thanos Receive and Mimir (`/api/v1/push`) accept.

Both encodings are written here, by hand and small, instead of pulling in protobuf and
a snappy binding for three messages and one compression format:

- protobuf (prometheus/prompb/remote.proto, types.proto): `WriteRequest { repeated
  TimeSeries timeseries = 1; }`, `TimeSeries { repeated Label labels = 1; repeated Sample
  samples = 2; }`, `Label { string name = 1; string value = 2; }`, `Sample { double value
  = 1; int64 timestamp = 2; }` (milliseconds). Labels sorted by name, `__name__` first
  among them as the sort puts it, as receivers require.
- snappy's block format (google/snappy format_description.txt): the uncompressed length
  as a varint, then literals and copies. The compressor is greedy over 4-byte matches
  within a 64 KiB window: label sets repeat from series to series, so a poll compresses
  several-fold. `snappy_decompress` is its inverse, for the tests and the fake stores.

A backfill (`foresize bench history-store`: 16 million samples a store) is encoded by
`encode_aligned`, numpy over every sample at once (the same bytes), and sent as
`snappy_stored` (one literal: valid snappy, not compressed; on loopback compressing in
Python costs more than the bytes it saves).
"""

from __future__ import annotations

import asyncio
import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from foresize.adapters.history.query_budget import RETRIED_STATUSES, QueryBudget
from foresize.adapters.history.store_auth import StoreAuth
from foresize.core.errors import ForesizeError

REMOTE_WRITE_HEADERS = {
    "Content-Encoding": "snappy",
    "Content-Type": "application/x-protobuf",
    "X-Prometheus-Remote-Write-Version": "0.1.0",
}

# (labels, [(timestamp ms, value), ...]): one series of a write request.
Series = tuple[Mapping[str, str], Sequence[tuple[int, float]]]


def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64  # int64 two's complement, as protobuf encodes negative int64
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


_DOUBLE = struct.Struct("<d")


def encode_write_request(series: Iterable[Series]) -> bytes:
    """The protobuf `WriteRequest` of `series` (uncompressed)."""
    out = bytearray()
    for labels, samples in series:
        ts = bytearray()
        for name in sorted(labels):
            ts += _field(1, _field(1, name.encode()) + _field(2, labels[name].encode()))
        for t_ms, value in samples:
            sample = b"\x09" + _DOUBLE.pack(value) + b"\x10" + _varint(int(t_ms))
            ts += _field(2, sample)
        out += _field(1, bytes(ts))
    return bytes(out)


def _read_varint(data: bytes, i: int) -> tuple[int, int]:
    shift = n = 0
    while True:
        if i >= len(data):
            raise ValueError("truncated varint")
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(data: bytes) -> Iterable[tuple[int, int, bytes | int]]:
    """(field number, wire type, payload) of a protobuf message (types 0, 1, 2)."""
    i = 0
    while i < len(data):
        key, i = _read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _read_varint(data, i)
            yield number, wire, value
        elif wire == 1:
            if i + 8 > len(data):
                raise ValueError("truncated fixed64")
            yield number, wire, data[i : i + 8]
            i += 8
        elif wire == 2:
            size, i = _read_varint(data, i)
            if i + size > len(data):
                raise ValueError("truncated field")
            yield number, wire, data[i : i + size]
            i += size
        else:
            raise ValueError(f"unsupported wire type {wire}")


def decode_write_request(data: bytes) -> list[tuple[dict[str, str], list[tuple[int, float]]]]:
    """The inverse of `encode_write_request` (ValueError on a malformed message)."""
    out = []
    for number, _, ts in _fields(data):
        if number != 1 or not isinstance(ts, bytes):
            continue
        labels: dict[str, str] = {}
        samples: list[tuple[int, float]] = []
        for n, _, part in _fields(ts):
            if not isinstance(part, bytes):
                continue
            if n == 1:
                kv = {k: v for k, _, v in _fields(part) if isinstance(v, bytes)}
                labels[kv.get(1, b"").decode()] = kv.get(2, b"").decode()
            elif n == 2:
                value, t = math.nan, 0
                for k, _, v in _fields(part):
                    if k == 1 and isinstance(v, bytes):
                        value = _DOUBLE.unpack(v)[0]
                    elif k == 2 and isinstance(v, int):
                        t = v - (1 << 64) if v >= 1 << 63 else v
                samples.append((t, value))
        out.append((labels, samples))
    return out


# ------------------------------------------------------------------------------ snappy


def label_bytes(labels: Mapping[str, str]) -> bytes:
    """A series' `Label` fields as `encode_write_request` writes them (sorted by name)."""
    return b"".join(
        _field(1, _field(1, name.encode()) + _field(2, labels[name].encode()))
        for name in sorted(labels)
    )


_VARINT_MAX = 10  # bytes of the longest varint (a negative int64)


def _sample_fields(times_ms: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every `Sample` field (`0x12`, length, value, timestamp) of `values` (series x
    samples) at `times_ms`: (bytes, series-major, each series' samples in time order;
    bytes of one series' samples, the same for every series as they share the times)."""
    t = np.asarray(times_ms, dtype=np.int64).astype(np.uint64)  # two's complement
    shifts = np.arange(_VARINT_MAX, dtype=np.uint64) * np.uint64(7)
    lengths = 1 + ((t[:, None] >> shifts[1:]) > 0).sum(axis=1)
    groups = ((t[:, None] >> shifts) & np.uint64(0x7F)).astype(np.uint8)
    column = np.arange(_VARINT_MAX)[None, :]
    groups |= np.where(column < lengths[:, None] - 1, 0x80, 0).astype(np.uint8)
    v = np.ascontiguousarray(values, dtype="<f8")
    n_series, n_samples = v.shape
    rows = np.zeros((n_series, n_samples, 12 + _VARINT_MAX), dtype=np.uint8)
    rows[:, :, 0] = 0x12  # Sample, field 2 of TimeSeries, length-delimited
    rows[:, :, 1] = (10 + lengths)[None, :]  # 0x09 + double + 0x10 + the varint
    rows[:, :, 2] = 0x09
    rows[:, :, 3:11] = v.view(np.uint8).reshape(n_series, n_samples, 8)
    rows[:, :, 11] = 0x10
    rows[:, :, 12:] = groups[None, :, :]
    keep = np.concatenate([np.ones((n_samples, 12), bool), column < lengths[:, None]], axis=1)
    data = rows[np.broadcast_to(keep, rows.shape)]
    return data, np.asarray(int(keep.sum()))


def encode_aligned(label_sets: Sequence[bytes], times_ms: np.ndarray, values: np.ndarray) -> bytes:
    """The protobuf `WriteRequest` of series that share their sample times (`values[i]`
    is series i's at `times_ms`; `label_sets[i]` its `label_bytes`), every sample encoded
    at once: the same bytes as `encode_write_request` of the same samples."""
    if len(label_sets) != np.shape(values)[0] or np.shape(values)[1] != np.size(times_ms):
        raise ValueError("values must be one row per label set, one column per time")
    data, per_series = _sample_fields(times_ms, values)
    size = int(per_series)
    blob = data.tobytes()
    out = []
    for i, labels in enumerate(label_sets):
        body = blob[i * size : (i + 1) * size]
        out.append(_varint(1 << 3 | 2) + _varint(len(labels) + size) + labels)
        out.append(body)
    return b"".join(out)


def snappy_stored(data: bytes) -> bytes:
    """`data` as a snappy block of one literal: valid snappy, nothing compressed."""
    out = bytearray(_varint(len(data)))
    _literal(out, data, 0, len(data))
    return bytes(out)


_MAX_OFFSET = 65535  # copies with a 2-byte offset reach this far back
_MIN_MATCH = 4


def _literal(out: bytearray, data: bytes, start: int, end: int) -> None:
    n = end - start
    if n <= 0:
        return
    if n <= 60:
        out.append((n - 1) << 2)
    else:
        size = (n - 1).to_bytes(4, "little").rstrip(b"\x00") or b"\x00"
        out.append((59 + len(size)) << 2)
        out += size
    out += data[start:end]


def _copy(out: bytearray, offset: int, length: int) -> None:
    while length > 0:
        # Never leave a tail under 4 bytes: a 1-byte-offset copy needs at least 4.
        n = min(length, 64) if length - 64 >= 4 or length <= 64 else 60
        if 4 <= n <= 11 and offset < 2048:
            out.append(((offset >> 8) << 5) | ((n - 4) << 2) | 1)
            out.append(offset & 0xFF)
        else:
            out.append(((n - 1) << 2) | 2)
            out += offset.to_bytes(2, "little")
        length -= n


def snappy_compress(data: bytes) -> bytes:
    """`data` in snappy's block format (greedy 4-byte matches, 64 KiB window)."""
    out = bytearray(_varint(len(data)))
    table: dict[bytes, int] = {}
    n = len(data)
    literal_start = i = 0
    misses = 0
    while i + _MIN_MATCH <= n:
        key = data[i : i + _MIN_MATCH]
        candidate = table.get(key)
        table[key] = i
        if candidate is None or i - candidate > _MAX_OFFSET:
            # Incompressible stretches are skipped faster (snappy's own heuristic).
            misses += 1
            i += 1 + (misses >> 5)
            continue
        misses = 0
        length = _MIN_MATCH
        while i + length < n and data[candidate + length] == data[i + length]:
            length += 1
        _literal(out, data, literal_start, i)
        _copy(out, i - candidate, length)
        i += length
        literal_start = i
    _literal(out, data, literal_start, n)
    return bytes(out)


def snappy_decompress(data: bytes) -> bytes:
    """The inverse of `snappy_compress`, for any valid snappy block (ValueError if not)."""
    size, i = _read_varint(data, 0)
    out = bytearray()
    while i < len(data):
        tag = data[i]
        i += 1
        kind = tag & 3
        if kind == 0:
            n = tag >> 2
            if n >= 60:
                width = n - 59
                if i + width > len(data):
                    raise ValueError("truncated literal length")
                n = int.from_bytes(data[i : i + width], "little")
                i += width
            n += 1
            if i + n > len(data):
                raise ValueError("truncated literal")
            out += data[i : i + n]
            i += n
            continue
        width = (0, 1, 2, 4)[kind]
        if i + width > len(data):
            raise ValueError("truncated copy")
        if kind == 1:
            length = ((tag >> 2) & 7) + 4
            offset = ((tag >> 5) << 8) | data[i]
            i += 1
        elif kind == 2:
            length = (tag >> 2) + 1
            offset = int.from_bytes(data[i : i + 2], "little")
            i += 2
        else:
            length = (tag >> 2) + 1
            offset = int.from_bytes(data[i : i + 4], "little")
            i += 4
        if offset == 0 or offset > len(out):
            raise ValueError("copy before the start of the data")
        for _ in range(length):  # a copy may overlap what it writes
            out.append(out[-offset])
    if len(out) != size:
        raise ValueError(f"decompressed {len(out)} bytes, header says {size}")
    return bytes(out)


# ------------------------------------------------------------------------------ client

MAX_SAMPLES_PER_REQUEST = 10_000
"""Samples one request carries: a few hundred KB, far below VictoriaMetrics' 32 MB
`-maxInsertRequestSize` and what Mimir's distributors take per push."""


class RemoteWriter:
    """Sends series to a remote-write endpoint: split into requests of at most
    MAX_SAMPLES_PER_REQUEST samples, 429/5xx retried with the read side's back-off
    (`QueryBudget.wait`), any other refusal an error naming the endpoint and its answer."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 30.0,
        headers: Mapping[str, str] | None = None,
        budget: QueryBudget | None = None,
        auth: StoreAuth | None = None,
    ) -> None:
        self.url = url
        self.auth = auth  # headers from files, read again for every send
        self.timeout = timeout
        self.headers = {**REMOTE_WRITE_HEADERS, **(headers or {})}
        self.budget = budget or QueryBudget()
        self.requests = 0
        self.samples = 0

    @staticmethod
    def batches(series: Sequence[Series], limit: int = MAX_SAMPLES_PER_REQUEST) -> list[bytes]:
        """The compressed bodies of the requests that carry `series`."""
        out: list[bytes] = []
        batch: list[Series] = []
        size = 0
        for labels, samples in series:
            i = 0
            while i < len(samples):
                part = samples[i : i + limit - size]
                batch.append((labels, part))
                size += len(part)
                i += len(part)
                if size == limit:
                    out.append(snappy_compress(encode_write_request(batch)))
                    batch, size = [], 0
        if batch:
            out.append(snappy_compress(encode_write_request(batch)))
        return out

    async def send(self, bodies: Sequence[bytes], session: Any = None) -> None:
        """POST each compressed body (in order: a receiver without an out-of-order window
        takes a series' samples oldest first)."""
        import aiohttp

        own = session is None
        if own:
            session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        try:
            headers = {**self.headers, **(self.auth.headers() if self.auth else {})}
            for body in bodies:
                await self._post(session, body, headers)
        finally:
            if own:
                await session.close()

    async def write(self, series: Sequence[Series], session: Any = None) -> None:
        bodies = await asyncio.to_thread(self.batches, series)
        await self.send(bodies, session)
        self.samples += sum(len(s) for _, s in series)

    async def _post(self, session: Any, body: bytes, headers: Mapping[str, str]) -> None:
        import aiohttp

        attempt = 0
        while True:
            said = ""
            try:
                async with session.post(self.url, data=body, headers=headers) as resp:
                    self.requests += 1
                    if resp.status in (200, 204):
                        return
                    said = " ".join((await resp.text()).split())[:200]
                    retry_after = resp.headers.get("Retry-After")
                    if resp.status not in RETRIED_STATUSES and resp.status < 500:
                        raise ForesizeError(
                            f"remote write to {self.url} refused with HTTP {resp.status}: {said}"
                        )
                    status = f"HTTP {resp.status}"
            except TimeoutError:
                status, retry_after = f"no answer within {self.timeout:g} s", None
            except aiohttp.ClientError as exc:
                status, retry_after = f"cannot reach it ({exc or type(exc).__name__})", None
            if attempt >= self.budget.retries:
                raise ForesizeError(
                    f"remote write to {self.url} failed {attempt + 1} time"
                    f"{'s' * (attempt > 0)} (retried with back-off): {status}"
                    + (f": {said}" if said else "")
                )
            await asyncio.sleep(self.budget.wait(attempt, retry_after))
            attempt += 1
