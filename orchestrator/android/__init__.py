"""Phone goals run as background tasks over the adb MCP server."""
