"""Retrieval quality: metrics, evaluation against labelled queries, findability audits, and the
``enhanced`` analyzer. Imports nothing, so loading one module loads only what it uses."""
