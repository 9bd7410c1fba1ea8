"""Forecasting models and backtest-based model selection (vectorised numpy, no I/O)."""
