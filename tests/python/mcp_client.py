"""A real MCP client against World's /mcp/: the official MCP Python SDK over streamable HTTP
with a bearer header. It initializes, lists the tools, calls one, and prints what it saw as
one JSON object on stdout for tests/tests/mcp_sdk.rs to check.

usage: mcp_client.py <mcp-url> <token> <tool> <arguments-json>
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


async def run(url: str, token: str, tool: str, arguments: dict) -> dict:
    http_client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http_client:
        async with streamable_http_client(url, http_client=http_client) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                initialized = await session.initialize()
                listed = await session.list_tools()
                called = await session.call_tool(tool, arguments)
                return {
                    "protocolVersion": initialized.protocol_version,
                    "serverName": initialized.server_info.name,
                    "tools": [t.name for t in listed.tools],
                    "isError": bool(called.is_error),
                    "text": [c.text for c in called.content if getattr(c, "type", "") == "text"],
                    "structuredContent": called.structured_content,
                }


def main() -> int:
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    url, token, tool, arguments = sys.argv[1:]
    seen = asyncio.run(run(url, token, tool, json.loads(arguments)))
    print(json.dumps(seen, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
