"""Alembic environment and revisions of the tool-index schema (shipped in the wheel)."""
