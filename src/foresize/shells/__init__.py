"""Shells: run the core's reconcile pass against a real API server (`kube`), a simulated
cluster (`sim`), and serve admission over HTTPS (`webhook`)."""
