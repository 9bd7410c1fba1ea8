"""Usage history: SQLite store, Prometheus and metrics-server readers, trace loaders."""
