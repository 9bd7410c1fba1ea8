"""`foresize operator --headroom*`: the flags read into the core's HeadroomConfig, and a
bad one refused naming it."""

from __future__ import annotations

import pytest

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
    ],
)
def test_a_bad_flag_is_refused_naming_it(args, message) -> None:
    with pytest.raises(ForesizeError, match=message.replace("(", r"\(")):
        headroom_config(*args)
