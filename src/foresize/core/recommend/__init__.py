"""Forecast -> recommendation: modes, buffer, bounds, limits, rounding, OOM floor (pure)."""
