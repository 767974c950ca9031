"""What an MCP client saw of World's /mcp/, as tests/tests/mcp_sdk.rs checks it, and the command
line its two clients (mcp_client.py, fastmcp_client.py) share:

usage: <client>.py <mcp-url> <token> <tool> <arguments-json>
"""

import asyncio
import json
import sys


def seen(initialized, tools: list, called) -> dict:
    """The initialize result, the listed tools and one call's result, as one JSON object."""
    return {
        "protocolVersion": initialized.protocol_version,
        "serverName": initialized.server_info.name,
        "tools": [t.name for t in tools],
        "isError": bool(called.is_error),
        "text": [c.text for c in called.content if getattr(c, "type", "") == "text"],
        "structuredContent": called.structured_content,
    }


def main(run, usage: str) -> int:
    """Runs `run(url, token, tool, arguments)` on the command line's words; prints what it saw."""
    if len(sys.argv) != 5:
        print(usage, file=sys.stderr)
        return 2
    url, token, tool, arguments = sys.argv[1:]
    print(json.dumps(asyncio.run(run(url, token, tool, json.loads(arguments))), sort_keys=True))
    return 0
