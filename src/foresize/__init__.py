"""Foresize: a forecast-driven, in-place autoscaler for Kubernetes workloads."""

__version__ = "0.1.0"
