"""`foresize simulate --policy vpa`: the VPA-style reference (architecture §3.7) sizing the pods
through the same disruption worker as Foresize (see `foresize.shells.sim.operator`)."""

from foresize.shells.sim.operator import install_vpa
from foresize.shells.sim.policies import register_policy

register_policy("vpa", install_vpa)
