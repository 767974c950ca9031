"""One session of the official MCP Python SDK over streamable HTTP, as the test clients open it."""

from contextlib import asynccontextmanager

from mcp import ClientSession
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


@asynccontextmanager
async def sdk_session(url: str, headers: dict):
    """An initialized session to the MCP endpoint `url`, sending `headers` on every request;
    yields the session and its initialize result."""
    http_client = create_mcp_http_client(headers=headers)
    async with http_client:
        async with streamable_http_client(url, http_client=http_client) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                yield session, await session.initialize()
