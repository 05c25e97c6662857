"""The semantic signal: an embedding model run locally, and what it makes of tools and queries."""
