"""BM25+ ranking: the formula, the corpus rules, stored postings as arrays, top-k selection and the
per-process ranker with its caches."""
