"""`foresize bench sim` (not yet built)."""
