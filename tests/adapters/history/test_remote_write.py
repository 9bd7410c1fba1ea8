"""Prometheus remote write, encoded by hand (`adapters.history.remote_write`): the protobuf
and snappy round trips, fuzzed, and real stores that accept what it writes and give it
back: Debian's `prometheus` (--web.enable-remote-write-receiver) and `victoria-metrics`
(/api/v1/write), each started by this module (skipped, saying why, when a binary is
missing)."""

from __future__ import annotations

import asyncio
import contextlib
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foresize.adapters.history.prometheus import PrometheusReader
from foresize.adapters.history.query_budget import QueryBudget
from foresize.adapters.history.remote_write import (
    RemoteWriter,
    decode_write_request,
    encode_aligned,
    encode_write_request,
    label_bytes,
    snappy_compress,
    snappy_decompress,
    snappy_stored,
)
from foresize.core.errors import ForesizeError
from foresize.testing.stores import real_store, store_missing

T0 = 1_780_000_000  # a whole minute, 2026-05-28, seconds


def series_of(n: int, samples: int, seed: int = 7):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        labels = {
            "__name__": "foresize_test_cpu",
            "namespace": f"ns-{i % 3}",
            "workload": f"web-{i}",
            "container": "app",
        }
        values = rng.gamma(2.0, 0.1, samples)
        out.append((labels, [((T0 + 60 * k) * 1000, float(v)) for k, v in enumerate(values)]))
    return out


def test_write_request_round_trips_labels_sorted_and_samples_exact():
    series = series_of(5, 7)
    decoded = decode_write_request(encode_write_request(series))
    assert [dict(labels) for labels, _ in decoded] == [dict(labels) for labels, _ in series]
    assert [samples for _, samples in decoded] == [samples for _, samples in series]
    # Receivers require labels sorted by name on the wire.
    raw = encode_write_request([({"b": "2", "a": "1", "__name__": "m"}, [(1, 1.0)])])
    assert raw.index(b"__name__") < raw.index(b"\x01a") < raw.index(b"\x01b")


def test_snappy_compresses_a_poll_several_fold_and_round_trips():
    raw = encode_write_request(series_of(2000, 1))
    packed = snappy_compress(raw)
    assert snappy_decompress(packed) == raw
    assert len(packed) < len(raw) / 3  # label sets repeat from series to series


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=3000))
def test_snappy_round_trips_any_bytes(data):
    assert snappy_decompress(snappy_compress(data)) == data


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([b"a", b"bc", b"abcd", b"\x00" * 70]), max_size=400))
def test_snappy_round_trips_long_repeats(parts):
    data = b"".join(parts)
    assert snappy_decompress(snappy_compress(data)) == data


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_decoders_refuse_garbage_with_value_error_only(data):
    for decode in (snappy_decompress, decode_write_request):
        with contextlib.suppress(ValueError):
            decode(data)


def test_batches_split_at_the_sample_limit_and_keep_every_sample():
    series = series_of(7, 30)
    bodies = RemoteWriter.batches(series, limit=50)
    assert len(bodies) == 5  # 210 samples, 50 a request
    back = [s for body in bodies for s in decode_write_request(snappy_decompress(body))]
    got: dict[str, list] = {}
    for labels, samples in back:
        assert len(samples) <= 50
        got.setdefault(labels["workload"], []).extend(samples)
    assert got == {labels["workload"]: samples for labels, samples in series}


@pytest.fixture(scope="module", params=["prometheus", "victoria-metrics"])
def store(request, tmp_path_factory):
    why = store_missing(request.param)
    if why:
        pytest.skip(why)
    with real_store(request.param, tmp_path_factory.mktemp(request.param)) as s:
        yield s


def test_the_vectorised_encoding_is_the_same_bytes_as_the_plain_one():
    rng = np.random.default_rng(26)
    # Varints of every length: 0, one byte, the 128 edge, milliseconds now, negative int64.
    times = np.array([0, 1, 127, 128, 16_383, 16_384, T0 * 1000, 2**62, -1, -(2**40)])
    values = rng.normal(size=(7, times.size)) * 10.0 ** rng.integers(-9, 12, (7, 1))
    values[2, 3] = np.nan
    values[4, 0] = -0.0
    labels = [{"__name__": "m", "pod": f"p-{i}", "ns": "a" * i} for i in range(7)]
    plain = encode_write_request(
        [
            (lab, list(zip(times.tolist(), row.tolist(), strict=True)))
            for lab, row in zip(labels, values, strict=True)
        ]
    )
    fast = encode_aligned([label_bytes(lab) for lab in labels], times, values)
    assert fast == plain
    assert snappy_decompress(snappy_stored(fast)) == fast
    with pytest.raises(ValueError, match="one row per label set"):
        encode_aligned([label_bytes(labels[0])], times, values)


def test_a_real_store_takes_a_stored_snappy_block_of_aligned_series(store):
    """What `bench history-store` loads with: one literal, nothing compressed."""
    times = (T0 + 60 * np.arange(30)) * 1000
    values = np.round(np.random.default_rng(3).uniform(0, 4, (3, times.size)), 3)
    labels = [label_bytes({"__name__": "aligned_test", "i": str(i)}) for i in range(3)]
    body = snappy_stored(encode_aligned(labels, times, values))
    asyncio.run(RemoteWriter(store.write_url).send([body]))
    store.flush()
    rows = asyncio.run(PrometheusReader(store.url).query("aligned_test[1h]", T0 + 60 * 29))
    got = {r["metric"]["i"]: [float(v) for _, v in r["values"]] for r in rows}
    assert got == {str(i): values[i].tolist() for i in range(3)}


def test_a_real_store_gives_back_what_was_remote_written(store):
    series = series_of(40, 120)
    random.Random(1).shuffle(series)
    writer = RemoteWriter(store.write_url)
    asyncio.run(writer.write(series))
    store.flush()
    # Prometheus keeps float64 exactly; VictoriaMetrics about 13 significant digits.
    REL = 0.0 if store.kind == "prometheus" else 1e-12
    reader = PrometheusReader(store.url, budget=QueryBudget(chunk_seconds=1800))
    end = T0 + 60 * 119
    # Raw samples (a range selector in an instant query): exactly what was written.
    rows = asyncio.run(reader.query('foresize_test_cpu{namespace="ns-1"}[3h]', end))
    got = {
        r["metric"]["workload"]: [(round(float(t) * 1000), float(v)) for t, v in r["values"]]
        for r in rows
    }
    want = {lab["workload"]: s for lab, s in series if lab["namespace"] == "ns-1"}
    assert sorted(got) == sorted(want)
    for workload, samples in want.items():
        assert [t for t, _ in got[workload]] == [t for t, _ in samples]
        assert np.allclose([v for _, v in got[workload]], [v for _, v in samples], rtol=REL, atol=0)
    # On the minute grid, chunked in half-hours: every minute's sample, once.
    ranged = asyncio.run(
        reader.query_range("max_over_time(foresize_test_cpu[59999ms])", T0, end, 60.0)
    )
    assert len(ranged) == 40 and reader.stats.queries >= 5
    by = {labels["workload"]: vs for labels, _, vs in ranged}
    for labels, samples in series:
        assert np.allclose(by[labels["workload"]], [v for _, v in samples], rtol=REL, atol=0)


def test_a_refusal_names_the_endpoint_and_the_answer(store):
    # A body that is not snappy is refused (400), not retried, and the answer is quoted.
    writer = RemoteWriter(store.write_url, budget=QueryBudget(retries=3, backoff=5.0))
    with pytest.raises(
        ForesizeError, match=rf"remote write to {store.write_url} refused with HTTP 400: .+"
    ):
        asyncio.run(writer.send([b"not snappy"]))
    assert writer.requests == 1


def test_a_store_that_is_down_is_an_error_after_the_retries():
    writer = RemoteWriter(
        "http://127.0.0.1:9/api/v1/write", budget=QueryBudget(retries=2, backoff=0.0)
    )
    with pytest.raises(ForesizeError, match=r"failed 3 times \(retried with back-off\)"):
        asyncio.run(writer.write(series_of(1, 1)))
