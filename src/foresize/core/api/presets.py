"""The named presets a ClusterAIScalePolicy (`spec.preset`) starts from: each sets the
forecast mode, the headroom, floors for every container, the update mode and the disruption
pacing. Plain data in the API's own spelling (a partial AIScaleTarget spec): the hierarchy
(`foresize.core.api.hierarchy`) lays a preset under the fields of the policy that names it.
docs/policies.md explains every value; tests/core/api/test_presets.py checks each is a
valid policy.

The floors follow what the reference tools use: VPA's recommender never recommends below
25m CPU / 250Mi memory per pod (`--pod-recommendation-min-cpu-millicores`,
`--pod-recommendation-min-memory-mb`); Foresize's own simulated targets use 10m / 32Mi.
A preset's floor is a `*` entry: a container bound written on the target wins over it.
"""

from __future__ import annotations

from foresize.core.api.access import JSONValue

COST = "cost"
BALANCED = "balanced"
PERFORMANCE = "performance"
BATCH = "batch"

PRESETS: dict[str, dict[str, JSONValue]] = {
    # The cheapest request that is still forecast-driven: the p95 CPU forecast without
    # headroom (memory keeps its twentyfold safer quantile, recommend.core), resized in
    # place where the kubelet can, and scale-downs acted on from a 5% change (the default
    # waits for 10%), so savings are taken as soon as usage falls.
    COST: {
        "model": {"mode": "cost_optimized", "forecast_buffer_percentage": 0},
        "vertical": {
            "containers": [
                {"name": "*", "cpu": {"lowerbound": "10m"}, "memory": {"lowerbound": "32Mi"}}
            ],
            "update_policy": {"update_mode": "in_place_or_recreate", "min_replicas": 2},
            "disruption": {"max_disrupted": "25%", "interval": "1m"},
            "scaling_behavior": {"scale_down": {"type": "percent", "percent": 5}},
        },
    },
    # The defaults with guard rails: the p98 forecast plus 5% headroom, VPA's CPU floor,
    # a fifth of the replicas at a time once a minute.
    BALANCED: {
        "model": {"mode": "balanced", "forecast_buffer_percentage": 5},
        "vertical": {
            "containers": [
                {"name": "*", "cpu": {"lowerbound": "25m"}, "memory": {"lowerbound": "64Mi"}}
            ],
            "update_policy": {"update_mode": "in_place_or_recreate", "min_replicas": 2},
            "disruption": {"max_disrupted": "20%", "interval": "1m"},
        },
    },
    # Latency-sensitive services: the p99 forecast plus 15%, never evicted (in-place
    # resizes only: a restart is what their users notice), one pod at a time every 5
    # minutes, quick to grow (2%) and slow to shrink (20%).
    PERFORMANCE: {
        "model": {"mode": "assurance_optimized", "forecast_buffer_percentage": 15},
        "vertical": {
            "containers": [
                {"name": "*", "cpu": {"lowerbound": "100m"}, "memory": {"lowerbound": "128Mi"}}
            ],
            "update_policy": {"update_mode": "in_place", "min_replicas": 2},
            "disruption": {"max_disrupted": 1, "interval": "5m"},
            "scaling_behavior": {
                "scale_up": {"type": "percent", "percent": 2},
                "scale_down": {"type": "percent", "percent": 20},
            },
        },
    },
    # Queue workers and batch consumers: throttling only slows them, so the p90 CPU
    # forecast over an hour's horizon (fewer, larger steps), recreated freely (a
    # single-replica worker may be evicted), half the replicas at a time.
    BATCH: {
        "model": {"mode": "undershoot", "forecast_blocks": "1h", "forecast_buffer_percentage": 0},
        "vertical": {
            "containers": [
                {"name": "*", "cpu": {"lowerbound": "10m"}, "memory": {"lowerbound": "64Mi"}}
            ],
            "update_policy": {"update_mode": "recreate", "min_replicas": 1},
            "disruption": {"max_disrupted": "50%", "interval": "30s"},
        },
    },
}

PRESET_NAMES: tuple[str, ...] = tuple(PRESETS)
