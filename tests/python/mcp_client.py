"""A real MCP client against World's /mcp/: the official MCP Python SDK over streamable HTTP
with a bearer header. It initializes, lists the tools, calls one, and prints what it saw as
one JSON object on stdout for tests/tests/mcp_sdk.rs to check.

usage: mcp_client.py <mcp-url> <token> <tool> <arguments-json>
"""

import sys

from mcp_seen import main, seen
from sdk_session import sdk_session


async def run(url: str, token: str, tool: str, arguments: dict) -> dict:
    async with sdk_session(url, {"Authorization": f"Bearer {token}"}) as (session, initialized):
        listed = await session.list_tools()
        called = await session.call_tool(tool, arguments)
        return seen(initialized, listed.tools, called)


if __name__ == "__main__":
    sys.exit(main(run, __doc__))
