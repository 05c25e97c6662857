"""Text analysis: the tokenizer of contract §3, the analyzers built on it, and the collation of
names (contract §4)."""
