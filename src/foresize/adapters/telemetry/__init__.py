"""Prometheus metrics, Kubernetes events, structured logging."""
