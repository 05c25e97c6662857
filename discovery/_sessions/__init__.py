"""Sessions: settings, the session handle, the search_tool_bm25 tool and host session files."""
