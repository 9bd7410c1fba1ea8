"""The policy hierarchy of a scenario (docs/policies.md, docs/simulator.md):

```yaml
policies:                       # ClusterAIScalePolicies: a name and the spec's fields
  - {name: default, preset: balanced}
  - {name: team, preset: performance, vertical: {mode: autonomous}}
namespaces:                     # Namespaces and their labels
  - {name: shop, labels: {foresize.io/policy: team}}
workloads:
  - {name: api, namespace: shop, policy: fast, ...}   # the target's spec.policy
```

Each policy is read with the API model (`parse_policy`), so an unknown preset or field is an
error naming the scenario's field, as `foresize validate` names it; `foresize simulate
--policies FILE` adds the ClusterAIScalePolicies of a manifest file (`policies_from_file`).
"""

from __future__ import annotations

from typing import Any

from foresize.core.api.cluster_policy import ClusterAIScalePolicy
from foresize.core.api.load import parse_policy
from foresize.core.api.names import dns_label_error, dns_subdomain_error
from foresize.core.errors import ForesizeError
from foresize.shells.sim.scenario_fields import FieldReader
from foresize.shells.sim.scenario_spec import Scenario

MAX_POLICIES = 1000  # a scenario is a test bed, not a cluster's whole history


def read_policies(ctx: FieldReader, top: dict[str, Any], sc: Scenario) -> None:
    """The `policies` and `namespaces` sections into `sc`; every workload's `policy` must
    name one of the scenario's policies (or one `--policies` adds: checked at the run)."""
    names: set[str] = set()
    entries = ctx.seq(top.get("policies"), "policies")
    if len(entries) > MAX_POLICIES:
        raise ctx.fail("policies", f"at most {MAX_POLICIES} policies")
    for i, raw in enumerate(entries):
        path = f"policies[{i}]"
        m = ctx.mapping(raw, path)
        name = ctx.string(m.get("name"), f"{path}.name")
        why = dns_subdomain_error(name)
        if why:
            raise ctx.fail(f"{path}.name", f"{name!r} is not a valid name: {why}")
        if name in names:
            raise ctx.fail(f"{path}.name", f"duplicate policy {name!r}")
        names.add(name)
        spec = {k: v for k, v in m.items() if k != "name"}
        obj = {"kind": "ClusterAIScalePolicy", "metadata": {"name": name}, "spec": spec}
        try:
            sc.policies.append(parse_policy(obj))
        except ForesizeError as exc:
            first = str(exc).splitlines()[0]
            field, _, problem = first.partition(": ")
            field = field.removeprefix("spec.").removeprefix("spec")
            raise ctx.fail(f"{path}.{field}" if field else path, problem or first) from None
    for i, raw in enumerate(ctx.seq(top.get("namespaces"), "namespaces")):
        path = f"namespaces[{i}]"
        m = ctx.mapping(raw, path)
        ctx.known(m, {"name", "labels"}, path)
        name = ctx.string(m.get("name"), f"{path}.name")
        why = dns_label_error(name)
        if why:
            raise ctx.fail(f"{path}.name", f"{name!r} is not a valid namespace: {why}")
        if name in sc.namespaces:
            raise ctx.fail(f"{path}.name", f"duplicate namespace {name!r}")
        sc.namespaces[name] = ctx.labels(m.get("labels"), f"{path}.labels")


def policies_from_file(path: str) -> list[ClusterAIScalePolicy]:
    """The ClusterAIScalePolicies of a YAML manifest file (`--policies`); other documents
    are skipped; an invalid policy is an error naming the file, line and field."""
    from foresize.adapters.files import field_line, iter_documents_with_lines, read_text

    out: list[ClusterAIScalePolicy] = []
    for _, obj, lines in iter_documents_with_lines(read_text(path), path):
        if not isinstance(obj, dict) or obj.get("kind") != "ClusterAIScalePolicy":
            continue
        try:
            out.append(parse_policy(obj))
        except ForesizeError as exc:
            first = str(exc).splitlines()[0]
            raise ForesizeError(
                f"{path}:{field_line(lines, first.partition(': ')[0])}: {first}"
            ) from None
    if not out:
        raise ForesizeError(f"{path}: no ClusterAIScalePolicy in the file")
    return out


def check_workload_policies(sc: Scenario, source: str) -> None:
    """Every workload's `policy` names a policy of the run (after `--policies`)."""
    known = {p.metadata.name for p in sc.policies}
    for i, w in enumerate(sc.workloads):
        if w.policy is not None and w.policy not in known:
            raise ForesizeError(
                f"{source}: workloads[{i}].policy: ClusterAIScalePolicy {w.policy!r} is not "
                "among the scenario's policies (or --policies)"
            )
