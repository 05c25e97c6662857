"""The catalog: tool record models, catalog file formats, indexing and preparation in workers."""
