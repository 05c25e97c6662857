"""The command line: commands and rendering (the only layer importing click and rich)."""
