"""`foresize operator --headroom*`: the flags read into the core's HeadroomConfig, and a
bad one refused naming it (fuzzed: whatever the flags hold, a config or one ForesizeError
naming a flag, never another exception)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foresize.core.api.quantity import MIB
from foresize.core.errors import ForesizeError
from foresize.front.cli.operator import headroom_config


def test_the_flags_make_the_config() -> None:
    c = headroom_config("room", "general, gpu", "30m", "cpu=500m,memory=1Gi", 10)
    assert (c.namespace, c.pools, c.window, c.max_replicas) == (
        "room",
        ("general", "gpu"),
        1800,
        10,
    )
    assert dict(c.pod_requests) == {"cpu": 500, "memory": 1024 * MIB}
    assert headroom_config("room", "", "1h", "cpu=1,memory=1Gi", 1).pools is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("Room!", "", "1h", "cpu=1,memory=1Gi", 1), "--headroom-namespace: 'Room!'"),
        (("r", "", "1h", "cpu=lots,memory=1Gi", 1), "--headroom-pod: cpu:"),
        (("r", "", "1h", "gpu=1", 1), "--headroom-pod: 'gpu=1'"),
        (("r", "", "1h", "cpu=1", 1), "--headroom-pod: memory must be given"),
        (("r", "", "10s", "cpu=1,memory=1Gi", 1), "--headroom-window: must be at least"),
        (("r", "", "1h", "cpu=1,memory=1Gi", -1), "--headroom-max-pods"),
        (("r", "", "1h", "cpu=1,memory=1Gi", 10**12), "--headroom-max-pods: must be from 0"),
        (("r", "", "1h", "cpu=1,cpu=2,memory=1Gi", 1), "--headroom-pod: cpu is given twice"),
        (("r", "gp, bad pool!", "1h", "cpu=1,memory=1Gi", 1), "--headroom-pools: 'bad pool!'"),
        (("r", "x" * 64, "1h", "cpu=1,memory=1Gi", 1), "--headroom-pools: 'xxx"),
        (("r", "", "2d", "cpu=1,memory=1Gi", 1), "--headroom-window: at most 1d"),
    ],
)
def test_a_bad_flag_is_refused_naming_it(args, message) -> None:
    with pytest.raises(ForesizeError, match=message.replace("(", r"\(")):
        headroom_config(*args)


FLAG_TEXT = st.one_of(
    st.text(max_size=24),
    st.sampled_from(
        [
            "", "0", "-1", "1e999", "nan", "inf", "1h", "-1h", "0s", "59s", "25h", "1e300h",
            "99999999999d", "cpu=1,memory=1Gi", "cpu=nan,memory=1Gi", "cpu=-1,memory=1Gi",
            "cpu=1e999,memory=1Gi", "cpu=1,memory=1e30Ei", "cpu=1,,memory=1Gi", "cpu==1",
            "cpu=1,memory=1Gi,gpu=1", " cpu = 1 , memory = 1Gi ", "a,b", ",,,", "UPPER",
            "-x-", "a" * 300,
        ]
    ),
)  # fmt: skip


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(FLAG_TEXT, FLAG_TEXT, FLAG_TEXT, FLAG_TEXT, st.integers(-(10**12), 10**12))
def test_odd_flags_make_a_config_or_one_error_naming_the_flag(
    namespace: str, pools: str, window: str, pod: str, max_pods: int
) -> None:
    try:
        c = headroom_config(namespace, pools, window, pod, max_pods)
    except ForesizeError as exc:
        assert str(exc).startswith("--headroom-"), exc
        assert "\n" not in str(exc)
        return
    # What was accepted is a config the core can size placeholders with.
    assert 60 <= c.window <= 86400
    assert 0 <= c.max_replicas <= 1000
    assert c.pod_requests["cpu"] > 0 and c.pod_requests["memory"] > 0
