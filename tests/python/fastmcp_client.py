"""A second real MCP client against World's /mcp/: FastMCP's `Client` over streamable HTTP with
a bearer header. It connects (initialize), lists the tools and calls one, and prints what it
saw as one JSON object on stdout for tests/tests/mcp_sdk.rs to check.

usage: fastmcp_client.py <mcp-url> <token> <tool> <arguments-json>
"""

import asyncio
import json
import sys

from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport


async def run(url: str, token: str, tool: str, arguments: dict) -> dict:
    transport = StreamableHttpTransport(url, headers={"Authorization": f"Bearer {token}"})
    async with Client(transport, timeout=30) as client:
        initialized = client.initialize_result
        listed = await client.list_tools()
        called = await client.call_tool(tool, arguments, raise_on_error=False)
        return {
            "protocolVersion": initialized.protocol_version,
            "serverName": initialized.server_info.name,
            "tools": [t.name for t in listed],
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
