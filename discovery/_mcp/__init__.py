"""The MCP gateway: host config files, upstream connections, ``sync`` and ``serve``."""
