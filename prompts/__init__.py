"""Prompt templates, shipped as package data of amd.prompt_templates (see pyproject.toml)."""
