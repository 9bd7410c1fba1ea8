"""The sim shell: a discrete-event simulated cluster with Kubernetes semantics.

Main entry points (see docs/simulator.md):
- `SimCluster` (foresize.shells.sim.cluster): implements `ClusterPort` (`snapshot()`, `apply()`),
  with `every()`, `on_usage()`, `admission_hook`, `scale_hook`, `events`, `run()` and
  `run_until()`.
- `load_scenario` / `parse_scenario` (foresize.shells.sim.scenario): YAML scenarios.
- `POLICIES` / `register_policy` (foresize.shells.sim.policies): what `foresize simulate --policy`
  installs into a fresh cluster.
- `simulate` (foresize.shells.sim.runner): run a scenario and get the summary dict.
"""
