"""The decaying-histogram model: its incremental path equals a rebuild, per matrix."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from foresize.core.forecast import models
from foresize.core.forecast.models import ForecastConfig, forward_max, model_decay

CFG = ForecastConfig()
QS = np.array([0.01, 0.1, 0.5, 0.9, 0.99, 0.999])
DAY_STEPS = CFG.steps(models.DAY)
HOUR_STEPS = CFG.steps(3600.0)


def _usage(seed: int, days: int, series: int = 12) -> np.ndarray:
    """Noisy series whose level moves every two days (so columns that leave the 8-day
    window shift the quantiles), with gaps."""
    rng = np.random.default_rng(seed)
    t = days * DAY_STEPS
    level = np.repeat(rng.uniform(0.1, 10.0, (series, days // 2 + 1)), 2 * DAY_STEPS, axis=1)
    y = level[:, :t] * rng.lognormal(0.0, 0.3, (series, t))
    y[rng.random((series, t)) < 0.02] = np.nan
    return y


@pytest.fixture(autouse=True)
def _fresh_cache():
    models._decay_cache.clear()
    yield
    models._decay_cache.clear()


def _rebuilt(y: np.ndarray, m: np.ndarray, o: int) -> np.ndarray:
    """The model at origin o from a fresh state (a copy is a matrix never seen before)."""
    return model_decay(y.copy(), m.copy(), o, QS, CFG)


def test_incremental_decay_equals_a_rebuild_after_the_window_slides():
    y = _usage(1, 12)
    m = forward_max(y, CFG.h)
    # Irregular steps between origins (1 to 40 columns), as decisions and backtests take.
    steps = np.random.default_rng(7).integers(1, 41, y.shape[1])
    origins = CFG.h + np.cumsum(steps)
    origins = origins[origins < y.shape[1] - 1]
    # Several origins past the 8-day window (and one inside it).
    checks = {int(origins[np.searchsorted(origins, d * DAY_STEPS)]) for d in (3, 9, 10, 11)}
    for o in origins:
        incremental = model_decay(y, m, int(o), QS, CFG)
        if o in checks:
            np.testing.assert_allclose(incremental, _rebuilt(y, m, int(o)), rtol=1e-12)
            checks.discard(int(o))
    assert not checks


def test_alternating_matrices_give_what_each_gives_alone():
    ya, yb = _usage(2, 10), _usage(3, 10, series=7)
    ma, mb = forward_max(ya, CFG.h), forward_max(yb, CFG.h)
    origins = list(range(CFG.h, ya.shape[1] - 1, 2 * HOUR_STEPS))
    alone_a = [model_decay(ya, ma, o, QS, CFG) for o in origins]
    models._decay_cache.clear()
    alone_b = [model_decay(yb, mb, o, QS, CFG) for o in origins]
    models._decay_cache.clear()
    for o, a, b in zip(origins, alone_a, alone_b, strict=True):
        np.testing.assert_allclose(model_decay(ya, ma, o, QS, CFG), a, rtol=1e-12)
        np.testing.assert_allclose(model_decay(yb, mb, o, QS, CFG), b, rtol=1e-12)


def test_alternating_matrices_keep_their_own_state(monkeypatch):
    built = []
    original = models._DecayState.__init__

    def counting(self, *args, **kwargs):
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(models._DecayState, "__init__", counting)
    ya, yb = _usage(4, 3), _usage(5, 3)
    ma, mb = forward_max(ya, CFG.h), forward_max(yb, CFG.h)
    for o in range(DAY_STEPS, ya.shape[1] - 1, HOUR_STEPS):
        model_decay(ya, ma, o, QS, CFG)
        model_decay(yb, mb, o, QS, CFG)
    assert len(built) == 2


def test_the_cache_does_not_keep_a_matrix_alive():
    y = _usage(6, 2)
    m = forward_max(y, CFG.h)
    model_decay(y, m, DAY_STEPS, QS, CFG)
    ref = weakref.ref(m)
    del m
    gc.collect()
    assert ref() is None
