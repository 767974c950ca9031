"""A second real MCP client against World's /mcp/: FastMCP's `Client` over streamable HTTP with
a bearer header. It connects (initialize), lists the tools and calls one, and prints what it
saw as one JSON object on stdout for tests/tests/mcp_sdk.rs to check.

usage: fastmcp_client.py <mcp-url> <token> <tool> <arguments-json>
"""

import sys

from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from mcp_seen import main, seen


async def run(url: str, token: str, tool: str, arguments: dict) -> dict:
    transport = StreamableHttpTransport(url, headers={"Authorization": f"Bearer {token}"})
    async with Client(transport, timeout=30) as client:
        listed = await client.list_tools()
        called = await client.call_tool(tool, arguments, raise_on_error=False)
        return seen(client.initialize_result, listed, called)


if __name__ == "__main__":
    sys.exit(main(run, __doc__))
