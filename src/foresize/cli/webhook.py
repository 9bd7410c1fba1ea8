"""`foresize webhook` (not yet built)."""
