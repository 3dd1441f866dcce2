"""Reference data, shipped as package data of amd.reference_data (see pyproject.toml)."""
