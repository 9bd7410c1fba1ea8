"""`foresize simulate --policy foresize`: the Foresize operator (forecasting recommender,
disruption worker, admission hook) on the simulated cluster (see `foresize.sim.operator`)."""

from foresize.sim.operator import install_foresize
from foresize.sim.policies import register_policy

register_policy("foresize", install_foresize)
