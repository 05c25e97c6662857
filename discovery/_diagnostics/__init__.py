"""Diagnostics: explain a score, verify the stored index."""
