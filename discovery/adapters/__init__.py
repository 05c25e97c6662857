"""Provider and framework adapters: the search tool and a session's active tools as the
Anthropic, OpenAI and pydantic-ai APIs take them.

Each adapter is a module of its own (``discovery.adapters.anthropic``, ``.openai``,
``.pydantic_ai``); this package imports none of them, so a host loads only the one it uses and
needs only that provider's SDK (none of them, for the two provider modules, which make plain
dicts).
"""
