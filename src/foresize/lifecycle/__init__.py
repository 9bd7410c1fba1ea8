"""Enrol, unenrol and revert, pause, templates, DaemonSet seeding (pure planning)."""
