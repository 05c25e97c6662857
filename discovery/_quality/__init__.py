"""Retrieval quality: metrics, evaluation against labelled queries, and findability
audits. Imports nothing, so loading one module loads only what it uses."""
