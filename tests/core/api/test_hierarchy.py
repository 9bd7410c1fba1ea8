"""The merge rules of the policy hierarchy (`core/api/hierarchy.py`) on plain JSON."""

from __future__ import annotations

from foresize.core.api.hierarchy import Layer, flatten, merge


def test_a_later_layer_replaces_a_field_and_is_its_source():
    merged = merge(
        [
            Layer(
                "cluster", {"model": {"mode": "cost_optimized", "forecast_buffer_percentage": 5}}
            ),
            Layer("target", {"model": {"mode": "balanced"}}),
        ]
    )
    assert merged.values == {"model": {"mode": "balanced", "forecast_buffer_percentage": 5}}
    assert merged.sources == {
        "model.mode": "target",
        "model.forecast_buffer_percentage": "cluster",
    }


def test_the_cadence_is_replaced_as_a_unit_and_a_new_mode_drops_an_inherited_percentile():
    merged = merge(
        [
            Layer(
                "cluster",
                {
                    "model": {
                        "forecast_cron": "0 * * * *",
                        "mode": "percentile",
                        "percentile_value": 97,
                    }
                },
            ),
            Layer("target", {"model": {"forecast_interval": "5m", "mode": "balanced"}}),
        ]
    )
    assert merged.values == {"model": {"forecast_interval": "5m", "mode": "balanced"}}
    assert set(merged.sources) == {"model.forecast_interval", "model.mode"}


def test_a_threshold_is_taken_whole():
    merged = merge(
        [
            Layer(
                "cluster",
                {
                    "vertical": {
                        "scaling_behavior": {
                            "scale_down": {"type": "absolute", "absolute": {"cpu": "50m"}}
                        }
                    }
                },
            ),
            Layer(
                "target",
                {
                    "vertical": {
                        "scaling_behavior": {"scale_down": {"type": "percent", "percent": 20}}
                    }
                },
            ),
        ]
    )
    assert merged.values["vertical"]["scaling_behavior"]["scale_down"] == {
        "type": "percent",
        "percent": 20,
    }
    assert merged.sources == {"vertical.scaling_behavior.scale_down": "target"}


def test_containers_merge_by_name_field_by_field_and_a_local_star_floor_reaches_named_entries():
    merged = merge(
        [
            Layer(
                "cluster",
                {"vertical": {"containers": [{"name": "api", "cpu": {"upperbound": "2"}}]}},
            ),
            Layer(
                "target",
                {"vertical": {"containers": [{"name": "*", "cpu": {"lowerbound": "100m"}}]}},
            ),
        ]
    )
    by_name = {c["name"]: c for c in merged.values["vertical"]["containers"]}
    assert by_name["*"] == {"name": "*", "cpu": {"lowerbound": "100m"}}
    assert by_name["api"] == {"name": "api", "cpu": {"upperbound": "2", "lowerbound": "100m"}}
    assert merged.sources["vertical.containers[api].cpu.lowerbound"] == "target"
    assert merged.sources["vertical.containers[api].cpu.upperbound"] == "cluster"


def test_within_one_layer_a_named_entry_stands_for_its_container_instead_of_star():
    # The rule of a single target (TargetView.policy_for): unchanged by the merge.
    merged = merge(
        [
            Layer(
                "target",
                {
                    "vertical": {
                        "containers": [
                            {"name": "*", "cpu": {"lowerbound": "1"}},
                            {"name": "api", "memory": {"lowerbound": "1Gi"}},
                        ]
                    }
                },
            )
        ]
    )
    by_name = {c["name"]: c for c in merged.values["vertical"]["containers"]}
    assert by_name["api"] == {"name": "api", "memory": {"lowerbound": "1Gi"}}


def test_a_local_floor_above_an_inherited_ceiling_is_kept_and_said():
    merged = merge(
        [
            Layer(
                "cluster/policy:default",
                {"vertical": {"containers": [{"name": "*", "memory": {"upperbound": "4Gi"}}]}},
            ),
            Layer(
                "target",
                {"vertical": {"containers": [{"name": "*", "memory": {"lowerbound": "8Gi"}}]}},
            ),
        ]
    )
    (entry,) = merged.values["vertical"]["containers"]
    assert entry == {"name": "*", "memory": {"lowerbound": "8Gi"}}
    assert merged.kept == [
        "vertical.containers[*].memory.lowerbound 8Gi (target) kept over upperbound 4Gi "
        "(cluster/policy:default)"
    ]
    assert "vertical.containers[*].memory.upperbound" not in merged.sources


def test_a_local_ceiling_below_an_inherited_floor_is_kept():
    merged = merge(
        [
            Layer(
                "cluster",
                {"vertical": {"containers": [{"name": "*", "cpu": {"lowerbound": "500m"}}]}},
            ),
            Layer(
                "target",
                {"vertical": {"containers": [{"name": "*", "cpu": {"upperbound": "200m"}}]}},
            ),
        ]
    )
    (entry,) = merged.values["vertical"]["containers"]
    assert entry == {"name": "*", "cpu": {"upperbound": "200m"}}
    assert merged.kept and merged.kept[0].startswith(
        "vertical.containers[*].cpu.upperbound 200m (target)"
    )


def test_flatten_names_every_leaf_and_containers_by_name():
    leaves = flatten(
        {
            "model": {"mode": "balanced"},
            "vertical": {
                "containers": [{"name": "api", "cpu": {"lowerbound": "10m"}}],
                "scaling_behavior": {"scale_up": {"type": "percent", "percent": 2}},
            },
        }
    )
    assert leaves == {
        "model.mode": "balanced",
        "vertical.containers[api].cpu.lowerbound": "10m",
        "vertical.scaling_behavior.scale_up": {"type": "percent", "percent": 2},
    }


def test_a_value_that_changes_shape_leaves_no_stale_source():
    """A dict replaced by a leaf takes its fields' sources with it, a leaf replaced by a
    dict its own; the layers given are never edited by the merge (a policy's layer is
    shared by every target under it)."""
    low = {"model": {"mode": {"kind": "x", "level": 2}}, "min_replicas": 1}
    high = {"model": {"mode": "balanced"}, "min_replicas": {"at": 3}}
    layers = [Layer("cluster", low), Layer("target", high)]
    merged = merge(layers)
    assert merged.values == {"model": {"mode": "balanced"}, "min_replicas": {"at": 3}}
    assert merged.sources == {"model.mode": "target", "min_replicas.at": "target"}
    assert low == {"model": {"mode": {"kind": "x", "level": 2}}, "min_replicas": 1}
    merged.values["min_replicas"]["at"] = 9  # type: ignore[index]
    assert high["min_replicas"] == {"at": 3}
