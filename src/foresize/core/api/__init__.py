"""The public API: CRD types (pydantic), quantities, CRD schema generation, validation."""
