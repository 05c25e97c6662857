"""Text analysis: the tokenizer of SPEC §3, the analyzers built on it, and the collation of
names (SPEC §4)."""
