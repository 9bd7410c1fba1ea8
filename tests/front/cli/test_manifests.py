"""Install manifests (`foresize manifests`) and the Helm chart that renders the same objects.

The chart is rendered by Helm's own engine (Helm v4 Go code through helm-python-sdk's
`Chart.render`, the code path of `helm template`, no cluster contacted). Built-in kinds are
checked with kubernetes-validate --strict for Kubernetes 1.33, 1.34 and 1.35; the two
prometheus-operator kinds (not built into Kubernetes, so kubernetes-validate has no schema)
are checked against cloudcoil's models generated from the prometheus-operator CRDs; their
alerts are checked with promtool in tests/adapters/telemetry/test_alert_rules.py."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from typer.testing import CliRunner

from foresize.core.api.crd import all_crds
from foresize.front.cli import app
from foresize.front.cli.alerts import alert_rules
from foresize.front.cli.manifests import build
from support.manifests import (
    ALL,
    CHART,
    IMAGE,
    PROM_KINDS,
    REPOSITORY,
    _by_key,
    _chart,
    _strip_helm_labels,
    cli,
    helm_render,
    validate_all,
)

# ---- foresize manifests -----------------------------------------------------------------


def test_manifests_all_pass_kubernetes_validate_strict():
    docs = cli(*ALL)
    kinds = [d["kind"] for d in docs]
    assert kinds[:3] == ["CustomResourceDefinition"] * 3
    assert set(kinds) >= {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Namespace",
        "StatefulSet",
        "Service",
        "PodDisruptionBudget",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "PrometheusRule",
        "ServiceMonitor",
    }
    validate_all(docs)


def test_strict_validation_catches_a_typo():
    deployment = copy.deepcopy(_by_key(build("operator", image=IMAGE))[("StatefulSet", "foresize")])
    deployment["spec"]["replicass"] = 2
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, "1.35.0", strict=True)


def test_the_image_is_required_where_the_operator_runs_with_a_clear_error():
    """No Foresize image is published: the manifests and the chart name the user's image
    or refuse, saying how to build and push one (a default nobody can pull made every
    install an ImagePullBackOff)."""
    from helm_python import Chart

    from foresize.core.errors import ForesizeError

    for section in ("all", "operator"):
        result = CliRunner().invoke(app, ["manifests", section])
        assert isinstance(result.exception, ForesizeError) and result.output == ""
        assert str(result.exception).startswith("--image is required")
        assert "docker build" in str(result.exception)
    assert cli("rbac") and cli("crds") and cli("webhooks")  # no image in these
    with pytest.raises(Exception, match=r"image\.repository is required") as refused:
        Chart.load(str(CHART)).render(None, name="foresize", namespace="x", is_install=True)
    assert "docker build" in str(refused.value)


def test_sections_partition_all():
    parts = [
        d
        for s in ("crds", "rbac", "operator", "webhooks", "monitoring")
        for d in build(s, image=IMAGE)
    ]
    assert parts == cli(*ALL) == build(image=IMAGE)


def test_unknown_section_is_a_clear_error(monkeypatch, capsys):
    from foresize.front.cli import main

    result = CliRunner().invoke(app, ["manifests", "everything"])
    assert result.exit_code != 0
    assert "unknown section 'everything'" in str(result.exception)
    # Through the console entry point: one line on stderr, exit status 2, no traceback.
    monkeypatch.setattr("sys.argv", ["foresize", "manifests", "everything"])
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown section 'everything'") and err.count("\n") == 1


@pytest.mark.parametrize("namespace", ["Bad_NS!", "", "-ops", "a" * 64])
def test_a_namespace_kubernetes_would_refuse_is_a_clear_error(namespace: str):
    from foresize.core.errors import ForesizeError

    result = CliRunner().invoke(app, ["manifests", "--namespace", namespace])
    assert isinstance(result.exception, ForesizeError), result.output
    assert str(result.exception).startswith(f"--namespace: {namespace!r} is not a valid")
    assert result.output == ""  # nothing half-printed for kubectl apply


def _rules_by_resource(rules: list[dict[str, Any]]) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out.setdefault((group, resource), set()).update(rule["verbs"])
    return out


def test_cluster_role_is_least_privilege():
    """The exact verbs are derived from the operator's calls (tests/shells/kube/test_rbac_calls.py);
    here the shape: no wildcards, nothing cluster-wide on Secrets or Leases, names pinned
    where RBAC can pin them."""
    docs = _by_key(build("rbac"))
    rules = docs[("ClusterRole", "foresize")]["rules"]
    for rule in rules:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"]
        assert "*" not in rule["apiGroups"]
    rights = _rules_by_resource(rules)
    assert ("", "secrets") not in rights
    assert "delete" not in rights[("", "pods")]
    assert ("coordination.k8s.io", "leases") not in rights
    webhook_rule = next(r for r in rules if "admissionregistration.k8s.io" in r["apiGroups"])
    assert webhook_rule["resourceNames"] == ["foresize"]
    assert docs[("Role", "foresize")]["metadata"]["namespace"] == "foresize-system"
    for rule in docs[("Role", "foresize")]["rules"]:
        if rule["verbs"] != ["create"]:  # create cannot be limited by name
            assert rule.get("resourceNames") or rule["resources"] == ["leases"], rule
    secret_get = next(
        r
        for r in docs[("Role", "foresize")]["rules"]
        if "secrets" in r["resources"] and "get" in r["verbs"]
    )
    assert secret_get["resourceNames"] == ["foresize-webhook-tls"]


def test_namespace_users_get_foresize_kinds_through_aggregation():
    docs = _by_key(build("rbac"))
    view, edit = docs[("ClusterRole", "foresize-view")], docs[("ClusterRole", "foresize-edit")]
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert "rbac.authorization.k8s.io/aggregate-to-view" not in edit["metadata"]["labels"]
    edit_rights = _rules_by_resource(edit["rules"])
    assert edit_rights[("foresize.io", "aiscaletargets")] >= {"create", "patch", "delete"}
    # The cluster-scoped template stays an administrator's.
    assert ("foresize.io", "clusteraiscaletemplates") not in edit_rights
    assert ("foresize.io", "clusteraiscaletemplates") not in _rules_by_resource(view["rules"])


def test_operator_deployment_and_service():
    docs = _by_key(build("operator", namespace="autoscaling", image="reg/f:1", replicas=3))
    dep = docs[("StatefulSet", "foresize")]
    assert dep["metadata"]["namespace"] == "autoscaling"
    assert dep["spec"]["replicas"] == 3
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "reg/f:1"
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == "foresize"
    assert (
        _by_key(build("operator", image=IMAGE))[("StatefulSet", "foresize")]["spec"]["replicas"]
        == 2
    )
    svc = docs[("Service", "foresize-webhook")]
    ports = {p["name"]: (p["port"], p["targetPort"]) for p in svc["spec"]["ports"]}
    assert ports == {"webhook": (443, "webhook"), "metrics": (8080, "metrics")}
    selector = dep["spec"]["selector"]["matchLabels"]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"] == selector and selector.items() <= labels.items()


def test_operator_survives_drains_restarts_and_slow_starts():
    """kube.md GAP 14, 17, 21: history on the mounted volume, a PDB that lets a drain
    through at one replica, a startupProbe longer than the certificate wait, a priority."""
    docs = _by_key(build("operator", image=IMAGE, replicas=1))
    dep = docs[("StatefulSet", "foresize")]
    spec = dep["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert Path(env["FORESIZE_HISTORY_DB"]).parent.as_posix() in mounts
    pdb = docs[("PodDisruptionBudget", "foresize")]["spec"]
    assert "minAvailable" not in pdb and pdb["maxUnavailable"] == 1  # 1 replica: drainable
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] > 120  # the cert wait
    assert spec["priorityClassName"] == "foresize-critical"
    priority = docs[("PriorityClass", "foresize-critical")]
    assert 0 < priority["value"] < 1_000_000_000 and priority["globalDefault"] is False


def test_webhooks_ignore_failures_time_out_fast_and_skip_system_namespaces():
    docs = _by_key(build("webhooks", namespace="ops"))
    mutating = docs[("MutatingWebhookConfiguration", "foresize")]["webhooks"]
    validating = docs[("ValidatingWebhookConfiguration", "foresize")]["webhooks"]
    for hook in mutating + validating:
        assert hook["failurePolicy"] == "Ignore" and hook["timeoutSeconds"] == 3
        assert hook["sideEffects"] == "None"
        (expr,) = hook["namespaceSelector"]["matchExpressions"]
        assert expr["key"] == "kubernetes.io/metadata.name" and expr["operator"] == "NotIn"
        assert set(expr["values"]) == {"kube-system", "kube-public", "kube-node-lease", "ops"}
        assert hook["clientConfig"]["service"]["namespace"] == "ops"
        assert hook["clientConfig"]["service"]["name"] == "foresize-webhook"
    pods = next(h for h in mutating if h["clientConfig"]["service"]["path"] == "/mutate-pods")
    assert [(r["resources"], r["operations"]) for r in pods["rules"]] == [(["pods"], ["CREATE"])]
    scale = next(h for h in mutating if h["clientConfig"]["service"]["path"] == "/mutate-scale")
    resources = {res for r in scale["rules"] for res in r["resources"]}
    assert resources == {"deployments/scale", "statefulsets/scale", "rollouts/scale"}
    assert all(r["operations"] == ["UPDATE"] for r in scale["rules"])
    (target,) = validating
    assert "aiscaletargets" in target["rules"][0]["resources"]
    assert target["clientConfig"]["service"]["path"] == "/validate-targets"


# ---- alerts ---------------------------------------------------------------------------


def test_alerts_use_only_exported_metric_names():
    from foresize.adapters.telemetry.metrics import METRIC_NAMES

    used = {m for rule in alert_rules() for m in re.findall(r"foresize_\w+", rule["expr"])}
    assert used == {
        "foresize_request_changes_total",
        "foresize_resizes_total",
        "foresize_stalled_pods",
        "foresize_breaker_open",
        "foresize_node_charge_gap",
        "foresize_leader",
        "foresize_webhook_bad_requests_total",
        "foresize_webhook_certificate_expiry_seconds",
    }
    assert used <= set(METRIC_NAMES)
    names = {rule["alert"] for rule in alert_rules()}
    assert {
        "ForesizeOperatorDown",
        "ForesizeNoLeaseHeld",
        "ForesizeWebhookErrors",
        "ForesizeWebhookCertificateExpiry",
    } <= names


# The alerts' promtool unit tests run on the exporter's real series:
# tests/adapters/telemetry/test_alert_rules.py.


# ---- the Helm chart -------------------------------------------------------------------


KEEP = "helm.sh/resource-policy"


def _without_keep(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    annotations = doc["metadata"].get("annotations") or {}
    assert annotations.pop(KEEP) == "keep", "Helm must not delete the CRDs on uninstall"
    if not annotations:
        doc["metadata"].pop("annotations", None)
    return doc


def test_chart_crds_are_the_generated_ones_and_upgraded_by_helm():
    """kube.md GAP 18: Helm never upgrades crds/; as templates the CRDs are upgraded with
    every `helm upgrade` (kept on uninstall), unless crds.install is false."""
    on_disk = yaml.safe_load_all((CHART / "files" / "foresize-crds.yaml").read_text())
    assert list(on_disk) == all_crds(), "regenerate: foresize manifests crds > .../files/..."
    assert _chart().crds == [], "CRDs in crds/ are installed once and never upgraded"
    rendered = [d for d in helm_render() if d["kind"] == "CustomResourceDefinition"]
    assert [_without_keep(d) for d in rendered] == all_crds()
    upgrade = _chart().render(
        {"image": {"repository": REPOSITORY}},
        name="foresize",
        namespace="foresize-system",
        is_upgrade=True,
    )
    assert "CustomResourceDefinition" in upgrade["foresize/templates/crds.yaml"]
    off = helm_render({"crds": {"install": False}})
    assert not [d for d in off if d["kind"] == "CustomResourceDefinition"]


def test_helm_render_equals_foresize_manifests():
    rendered = helm_render()
    validate_all([d for d in rendered if d["kind"] != "CustomResourceDefinition"])
    rendered = [
        _without_keep(d) if d["kind"] == "CustomResourceDefinition" else d for d in rendered
    ]
    # Helm installs into its release namespace; the headroom namespace both ship.
    ours = [
        d
        for d in cli(*ALL)
        if d["kind"] != "Namespace" or d["metadata"]["name"] == "foresize-headroom"
    ]
    assert _by_key(_strip_helm_labels(rendered)) == _by_key(ours)
    # Helm adds only its own labels.
    dep = _by_key(rendered)[("StatefulSet", "foresize")]
    assert dep["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"


def test_helm_monitoring_labels_for_prometheus_operator_selectors():
    rendered = _by_key(helm_render({"monitoring": {"labels": {"release": "kube-prometheus"}}}))
    for kind in PROM_KINDS:
        assert rendered[(kind, "foresize")]["metadata"]["labels"]["release"] == "kube-prometheus"
    pvc = _by_key(helm_render({"history": {"persistentVolumeClaim": "foresize-history"}}))
    sts = pvc[("StatefulSet", "foresize")]["spec"]
    data = next(v for v in sts["template"]["spec"]["volumes"] if v["name"] == "data")
    assert data == {"name": "data", "persistentVolumeClaim": {"claimName": "foresize-history"}}
    assert "volumeClaimTemplates" not in sts  # the existing claim instead of one per replica


def _history(sts: dict) -> tuple[list, dict | None]:
    """(claim templates, the `data` volume of the pod if it is not a claim template's)."""
    volumes = sts["spec"]["template"]["spec"]["volumes"]
    data = next((v for v in volumes if v["name"] == "data"), None)
    return sts["spec"].get("volumeClaimTemplates", []), data


def test_the_history_is_on_a_claim_per_replica_by_default_and_an_emptydir_if_asked():
    """kube.md N8: an emptyDir lost the history at every rollout and drain."""
    (claim,), data = _history(_by_key(build("operator", image=IMAGE))[("StatefulSet", "foresize")])
    assert data is None  # the claim template's volume
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "2Gi"}},
    }  # no storageClassName: the cluster's default class
    sts = _by_key(
        cli(
            "operator", "--image", IMAGE, "--history-storage-class", "fast", "--history-size", "5Gi"
        )
    )[("StatefulSet", "foresize")]
    validate_all([sts])
    (claim,), _ = _history(sts)
    assert claim["spec"]["storageClassName"] == "fast"
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
    sts = _by_key(cli("operator", "--image", IMAGE, "--no-history-volume"))[
        ("StatefulSet", "foresize")
    ]
    validate_all([sts])
    assert _history(sts) == ([], {"name": "data", "emptyDir": {}})
    # The chart, the same three ways.
    for values, cli_args in (
        ({}, []),
        (
            {"history": {"persistence": {"storageClassName": "fast", "size": "5Gi"}}},
            ["--history-storage-class", "fast", "--history-size", "5Gi"],
        ),
        ({"history": {"persistence": {"enabled": False}}}, ["--no-history-volume"]),
        (
            {"history": {"store": {"url": "http://vm:8428", "writeUrl": "http://vm:8428/w"}}},
            ["--history-store", "http://vm:8428", "--history-store-write", "http://vm:8428/w"],
        ),
    ):
        ours = _by_key(cli("operator", "--image", IMAGE, *cli_args))[("StatefulSet", "foresize")]
        theirs = _by_key(_strip_helm_labels(helm_render(values)))[("StatefulSet", "foresize")]
        assert _history(theirs) == _history(ours), values
        assert _env(theirs) == _env(ours), values


def _env(sts: dict) -> dict:
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value") for e in container["env"]}


def test_a_shared_history_store_replaces_the_sqlite_file_and_its_claims():
    """Issue 26: with a shared store every replica reads the same history; no claim per
    replica, no SQLite file."""
    sts = _by_key(cli("operator", "--image", IMAGE, "--history-store", "http://vm:8428"))[
        ("StatefulSet", "foresize")
    ]
    validate_all([sts])
    assert _history(sts) == ([], {"name": "data", "emptyDir": {}})
    env = _env(sts)
    assert env["FORESIZE_HISTORY_STORE"] == "http://vm:8428"
    assert "FORESIZE_HISTORY_DB" not in env and "FORESIZE_HISTORY_STORE_WRITE" not in env


def test_the_chart_gives_the_shared_store_a_tenant_and_a_secret_from_a_mounted_file():
    """Issue 26: Mimir's tenant, and the store's token or password from a Secret mounted
    read-only (the operator reads the file for every request), never in the pod spec."""
    store = {"url": "http://mimir/prometheus", "tenant": "team-a", "tokenSecret": "hs-token"}
    sts = _by_key(helm_render({"history": {"store": store}}))[("StatefulSet", "foresize")]
    validate_all([sts])
    env = _env(sts)
    assert env["FORESIZE_HISTORY_STORE_TENANT"] == "team-a"
    assert env["FORESIZE_HISTORY_STORE_TOKEN_FILE"] == "/etc/foresize/history-store/token"
    pod = sts["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "history-store-auth")
    assert mount == {
        "name": "history-store-auth",
        "mountPath": "/etc/foresize/history-store",
        "readOnly": True,
    }
    volume = next(v for v in pod["volumes"] if v["name"] == "history-store-auth")
    assert volume == {"name": "history-store-auth", "secret": {"secretName": "hs-token"}}
    basic = {"url": "http://mimir/prometheus", "basicAuthSecret": "hs-basic"}
    sts = _by_key(helm_render({"history": {"store": basic}}))[("StatefulSet", "foresize")]
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["FORESIZE_HISTORY_STORE_USERNAME"]["valueFrom"] == {
        "secretKeyRef": {"name": "hs-basic", "key": "username"}
    }
    assert env["FORESIZE_HISTORY_STORE_PASSWORD_FILE"]["value"].endswith("/password")
    assert "FORESIZE_HISTORY_STORE_TENANT" not in env
    # Without a store, none of it.
    sts = _by_key(helm_render({"history": {"store": {"tokenSecret": "hs"}}}))[
        ("StatefulSet", "foresize")
    ]
    assert not any(
        v["name"] == "history-store-auth" for v in sts["spec"]["template"]["spec"]["volumes"]
    )


@pytest.mark.parametrize(
    ("store", "args"),
    [
        (
            {"url": "http://mimir/prometheus", "tenant": "team-a", "tokenSecret": "hs-token"},
            ["--history-store-tenant", "team-a", "--history-store-token-secret", "hs-token"],
        ),
        (
            {"url": "http://mimir/prometheus", "basicAuthSecret": "hs-basic"},
            ["--history-store-basic-auth-secret", "hs-basic"],
        ),
    ],
    ids=["tenant-and-token", "basic-auth"],
)
def test_foresize_manifests_gives_the_shared_store_its_tenant_and_secret_as_the_chart_does(
    store: dict, args: list[str]
) -> None:
    """`foresize manifests` had only the store's URLs: a store behind auth needed the chart
    (or a hand edit). The container's env, mounts and volumes equal the chart's."""
    ours = _by_key(cli("operator", "--image", IMAGE, "--history-store", store["url"], *args))[
        ("StatefulSet", "foresize")
    ]
    validate_all([ours])
    theirs = _by_key(_strip_helm_labels(helm_render({"history": {"store": store}})))[
        ("StatefulSet", "foresize")
    ]
    pod, their_pod = (s["spec"]["template"]["spec"] for s in (ours, theirs))
    (container,), (their_container,) = pod["containers"], their_pod["containers"]
    assert container["env"] == their_container["env"]
    assert container["volumeMounts"] == their_container["volumeMounts"]
    assert pod["volumes"] == their_pod["volumes"]
    assert {"name": "history-store-auth", "secret": {"secretName": args[-1]}} in pod["volumes"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"history_store_token_secret": "hs"},
            "--history-store-token-secret needs --history-store",
        ),
        ({"history_store_tenant": "a"}, "--history-store-tenant needs --history-store"),
        (
            {"history_store": "http://m", "history_store_token_secret": "Bad_Name"},
            "--history-store-token-secret: 'Bad_Name' is not a valid Secret name: ",
        ),
        (
            {
                "history_store": "http://m",
                "history_store_token_secret": "a",
                "history_store_basic_auth_secret": "b",
            },
            "--history-store-token-secret and --history-store-basic-auth-secret: give one",
        ),
        (
            {"history_store": "http://m", "history_store_tenant": "a\r\nX-Evil: 1"},
            "--history-store-tenant: ",
        ),
    ],
)
def test_bad_history_store_options_are_refused_naming_the_option(
    kwargs: dict, message: str
) -> None:
    from foresize.core.errors import ForesizeError

    with pytest.raises(ForesizeError) as err:
        build("operator", image=IMAGE, **kwargs)
    assert str(err.value).startswith(message)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--history-size", "lots"],
            "--history-size: 'lots' is not a storage size (a quantity such as 2Gi)",
        ),
        (
            ["--history-size", "0"],
            "--history-size: '0' is not a storage size (a quantity such as 2Gi)",
        ),
        (
            ["--history-storage-class", "Fast_SSD"],
            "--history-storage-class: 'Fast_SSD' is not a valid StorageClass name: ",
        ),
    ],
)
def test_bad_history_options_are_refused_naming_the_option(args: list[str], message: str) -> None:
    from foresize.core.errors import ForesizeError

    with pytest.raises(ForesizeError) as err:
        build(
            "operator",
            image=IMAGE,
            **{
                "history_size": args[1] if args[0] == "--history-size" else "2Gi",
                "history_storage_class": args[1] if args[0] == "--history-storage-class" else "",
            },
        )
    assert str(err.value).startswith(message)


def test_helm_values_change_names_namespace_and_options():
    rendered = _by_key(
        helm_render(
            {
                "replicaCount": 3,
                "image": {"repository": "reg/foresize", "tag": "dev"},
                "certManager": {"enabled": True},
                "monitoring": {"enabled": False},
                "excludeSelector": {"team": "payments", "foresize.io/in-place": "off"},
            },
            name="fs",
            ns="autoscaling",
        )
    )
    assert not any(kind in PROM_KINDS for kind, _ in rendered)
    dep = rendered[("StatefulSet", "fs")]
    assert dep["metadata"]["namespace"] == "autoscaling" and dep["spec"]["replicas"] == 3
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "reg/foresize:dev"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["FORESIZE_WEBHOOK_CONFIGURATION"] == "fs"
    assert env["FORESIZE_TLS_SECRET"] == "fs-webhook-tls"
    assert env["FORESIZE_CERT_MANAGER"] == "true"
    # The operator's own parser reads what the chart writes.
    from foresize.core.vertical.policy import parse_exclude_selector

    assert parse_exclude_selector(env["FORESIZE_EXCLUDE_SELECTOR"]) == {
        "team": "payments",
        "foresize.io/in-place": "off",
    }
    mutating = rendered[("MutatingWebhookConfiguration", "fs")]
    assert mutating["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": "autoscaling/fs-webhook"
    }
    (expr,) = mutating["webhooks"][0]["namespaceSelector"]["matchExpressions"]
    assert "autoscaling" in expr["values"] and "kube-system" in expr["values"]
    cert = rendered[("Certificate", "fs-webhook")]
    assert cert["spec"]["secretName"] == "fs-webhook-tls"
    assert "fs-webhook.autoscaling.svc" in cert["spec"]["dnsNames"]
    assert ("Issuer", "fs-selfsigned") in rendered
    role = rendered[("ClusterRole", "fs")]
    hook_rule = next(r for r in role["rules"] if "admissionregistration.k8s.io" in r["apiGroups"])
    assert hook_rule["resourceNames"] == ["fs"]
    validate_all([d for d in rendered.values() if d["apiVersion"] != "cert-manager.io/v1"])


def test_helm_lint_is_clean():
    from helm_python import lint

    report = lint(
        str(CHART),
        {"image": {"repository": REPOSITORY}},
        strict=True,
        namespace="foresize-system",
        kube_version="v1.35.0",
    )
    errors = [m for m in report.get("messages") or [] if m.get("severity", 0) >= 2]
    assert errors == [] and not report.get("errors"), report
