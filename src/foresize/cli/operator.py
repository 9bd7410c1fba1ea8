"""`foresize operator` (not yet built)."""
