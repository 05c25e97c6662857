"""Benchmarks for tool-index: catalog generator, peers, harness and load run."""
