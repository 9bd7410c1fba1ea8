"""Benchmark bodies (the `foresize bench ...` commands' work): they drive the shells and the
core; the typer wrappers stay in `front.cli`. The only importer of `foresize.testing`."""
