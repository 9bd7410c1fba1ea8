"""Kubernetes JSON -> core types: the fields the planners depend on, API defaults, and bad
quantities and timestamps dropped with a line naming the object and field (never a crash;
the core does no I/O, so the lines go to the caller's `dropped` list and the shell logs
them)."""

from __future__ import annotations

from foresize.core.api.fields import format_timestamp, parse_timestamp
from foresize.core.cluster.kubejson import (
    hpa_from,
    node_from,
    parse_server_version,
    pdb_from,
    pod_from,
    workload_from,
)


def test_pod_with_sidecar_resize_policy_and_termination():
    pod = pod_from(
        {
            "metadata": {
                "name": "db-0",
                "namespace": "data",
                "uid": "u",
                "generation": 4,
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "deletionTimestamp": "2026-01-01T01:00:00.5Z",
                "annotations": {"kubernetes.io/config.mirror": "x"},
                "ownerReferences": [
                    {"kind": "Other", "name": "o"},
                    {
                        "kind": "StatefulSet",
                        "name": "db",
                        "controller": True,
                        "apiVersion": "apps/v1",
                    },
                ],
            },
            "spec": {
                "nodeName": "n1",
                "priority": 1000,
                "os": {"name": "windows"},
                "containers": [
                    {
                        "name": "db",
                        "resources": {
                            "requests": {"cpu": "1.5", "memory": "1Gi"},
                            "limits": {"memory": "2G"},
                        },
                        "resizePolicy": [
                            {"resourceName": "memory", "restartPolicy": "RestartContainer"}
                        ],
                    }
                ],
                "initContainers": [
                    {
                        "name": "proxy",
                        "restartPolicy": "Always",
                        "resources": {"requests": {"cpu": "50m"}},
                    }
                ],
            },
            "status": {
                "phase": "Running",
                "observedGeneration": 3,
                "conditions": [
                    {
                        "type": "PodResizeInProgress",
                        "status": "True",
                        "reason": "Error",
                        "message": "memory limit below usage",
                    }
                ],
                "containerStatuses": [
                    {
                        "name": "db",
                        "ready": True,
                        "restartCount": 3,
                        "allocatedResources": {"cpu": "1", "memory": "1Gi"},
                        "resources": {"requests": {"cpu": "1"}, "limits": {"memory": "2G"}},
                        "lastState": {
                            "terminated": {
                                "reason": "OOMKilled",
                                "finishedAt": "2026-01-01T00:30:00Z",
                            }
                        },
                    }
                ],
            },
        }
    )
    assert pod.owner.kind == "StatefulSet" and pod.owner.name == "db"
    assert pod.static and pod.os == "windows" and pod.priority == 1000
    assert pod.generation == 4 and pod.observed_generation == 3
    assert pod.deletion_time == parse_timestamp("2026-01-01T01:00:00.5Z") and pod.terminating
    c = pod.containers[0]
    assert c.resources.requests == {"cpu": 1500, "memory": 2**30} and c.resources.limits == {
        "memory": 2 * 10**9
    }
    assert c.resize_policy == {"memory": "RestartContainer"}
    assert pod.init_containers[0].is_sidecar
    st = pod.status_of("db")
    assert st.allocated == {"cpu": 1000, "memory": 2**30} and st.restart_count == 3
    assert st.last_termination_reason == "OOMKilled"
    assert pod.condition("PodResizeInProgress").reason == "Error"


def test_bad_quantity_is_dropped_and_named():
    dropped: list[str] = []
    node = node_from(
        {
            "metadata": {"name": "n1", "labels": {"zone": "a"}},
            "spec": {"unschedulable": True},
            "status": {
                "allocatable": {"cpu": "3800m", "memory": "lots", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "False"}],
            },
        },
        dropped,
    )
    assert node.allocatable == {"cpu": 3800, "pods": 110}
    assert node.unschedulable and not node.ready
    assert dropped == [
        "node n1 allocatable: memory quantity 'lots' is not a Kubernetes quantity; ignored"
    ]


def test_pdb_hpa_and_workloads():
    pdb = pdb_from(
        {
            "metadata": {"name": "p", "namespace": "s"},
            "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "a"}}},
            "status": {
                "disruptionsAllowed": 1,
                "currentHealthy": 3,
                "desiredHealthy": 2,
                "expectedPods": 3,
            },
        }
    )
    assert (
        pdb.min_available == "50%" and pdb.max_unavailable is None and pdb.disruptions_allowed == 1
    )
    hpa = hpa_from(
        {
            "metadata": {"name": "h", "namespace": "s"},
            "spec": {
                "scaleTargetRef": {"kind": "Deployment", "name": "web"},
                "minReplicas": 2,
                "maxReplicas": 9,
                "metrics": [
                    {
                        "type": "Resource",
                        "resource": {
                            "name": "cpu",
                            "target": {"type": "Utilization", "averageUtilization": 70},
                        },
                    },
                    {
                        "type": "ContainerResource",
                        "containerResource": {
                            "name": "memory",
                            "container": "app",
                            "target": {"type": "AverageValue", "averageValue": "512Mi"},
                        },
                    },
                    {"type": "External", "external": {}},
                ],
            },
        }
    )
    assert hpa.scaling_resources() == {"cpu"}
    assert hpa.metrics[1].target_average_value == 512 * 2**20 and hpa.metrics[1].container == "app"
    ds = workload_from(
        "DaemonSet",
        {
            "metadata": {"name": "agent", "namespace": "ops"},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": {"spec": {"containers": [{"name": "a"}]}},
            },
            "status": {"desiredNumberScheduled": 5},
        },
    )
    assert ds.replicas == 5 and ds.template.containers[0].name == "a"
    rs = workload_from(
        "ReplicaSet",
        {
            "metadata": {
                "name": "web-1",
                "namespace": "s",
                "ownerReferences": [{"kind": "Deployment", "name": "web", "controller": True}],
            },
            "spec": {},
        },
    )
    assert rs.owner.name == "web" and rs.replicas == 1


def test_versions_and_times():
    assert parse_server_version({"major": "1", "minor": "33+"}) == (1, 33)
    assert parse_server_version({"major": "", "minor": "", "gitVersion": "v1.35.0-gke.1"}) == (
        1,
        35,
    )
    assert format_timestamp(parse_timestamp("2026-05-28T20:26:40Z")) == "2026-05-28T20:26:40Z"
