"""Predictive replicas and the */scale decision (pure)."""
