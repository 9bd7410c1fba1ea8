"""Adapters: the I/O the core is kept free of (history stores and readers, files, telemetry).
They import the core, never a shell, a benchmark or the front."""
