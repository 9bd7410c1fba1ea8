"""HTML reports and plots."""
