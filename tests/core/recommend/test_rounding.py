"""Requests are rounded up to 1m / 1Mi by one rule, float32 noise ignored, wherever the
rounding happens: the operator's recommendation and every row of `bench recommend`."""

import numpy as np

from foresize.core.api.quantity import MIB, round_up_to_unit
from foresize.core.recommend.core import round_up
from foresize.core.recommend.finish import round_up_request

# 0.3 cores, 1.1 cores and 200Mi as float32 history stores read them back.
NOISY_CPU = [float(np.float32(0.3)) * 1000.0, float(np.float32(1.1)) * 1000.0]
NOISY_MEMORY = [float(np.float32(200 * MIB))]


def test_float32_noise_is_not_a_whole_millicore():
    assert round_up("cpu", np.array(NOISY_CPU)).tolist() == [300.0, 1100.0]
    assert [round_up_request("cpu", v) for v in NOISY_CPU] == [300, 1100]


def test_a_real_excess_still_rounds_up():
    assert round_up("cpu", np.array([300.01, 300.5])).tolist() == [301.0, 301.0]
    assert round_up("memory", np.array([200 * MIB + 1024.0])).tolist() == [201.0 * MIB]
    assert round_up_to_unit("memory", 200 * MIB + 1024.0) == 201 * MIB


def test_the_vector_and_scalar_forms_agree():
    values = np.random.default_rng(7).uniform(1, 5000, 500)
    values = np.concatenate([values, values.astype(np.float32).astype(np.float64), NOISY_CPU])
    for resource, scale in (("cpu", 1.0), ("memory", float(MIB))):
        vector = round_up(resource, values * scale).tolist()
        assert vector == [round_up_to_unit(resource, v * scale) for v in values]
