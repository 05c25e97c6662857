"""Text analysis: the tokenizer of SPEC §3 and the collation of names (SPEC §4)."""
