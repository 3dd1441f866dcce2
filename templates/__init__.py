"""Page templates (amd view), shipped as package data of amd.page_templates (see pyproject.toml)."""
