"""`foresize simulate --policy foresize[:MODE]`: the Foresize operator (forecasting
recommender, disruption worker, admission hook) on the simulated cluster (see
`foresize.shells.sim.operator`). `foresize` uses the default mode (balanced); `foresize:MODE`
every target in that named mode; `foresize-coordinate` every target with
`hpa_resource_policy: coordinate`; `foresize+headroom` with forecast-sized headroom
placeholders (`core.cluster.headroom`, the operator's `--headroom`) for the whole
cluster; `foresize-window` every target with a nightly
maintenance window (01:00-05:00 UTC): in-place resizes go on all day, evictions and
restarting resizes only in the window (docs/windows.md)."""

from functools import partial

from foresize.core.cluster.headroom import HeadroomConfig
from foresize.shells.sim.operator import install_foresize
from foresize.shells.sim.policies import register_policy

register_policy("foresize", install_foresize)
# Vertical and horizontal on the HPA's own metric (docs/horizontal.md).
register_policy("foresize-coordinate", partial(install_foresize, hpa_resource_policy="coordinate"))
register_policy("foresize+headroom", partial(install_foresize, headroom=HeadroomConfig()))
# The window scenario of issue 24: the same policy, disruptive actions held to the night.
NIGHTLY_WINDOW = {"windows": [{"schedule": "0 1 * * *", "duration": "4h", "timeZone": "UTC"}]}
register_policy(
    "foresize-window", partial(install_foresize, vertical={"maintenance": NIGHTLY_WINDOW})
)
for _mode in ("undershoot", "cost_optimized", "assurance_optimized", "overshoot"):
    register_policy(f"foresize:{_mode}", partial(install_foresize, mode=_mode))
