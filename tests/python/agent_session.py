"""A scripted agent session through the official MCP Python SDK: initialize, list the tools,
then call each (tool, arguments) pair of a JSON list in order on one connection, and print what
came back as one JSON object on stdout for tests/tests/coding_tools.rs to check.

usage: agent_session.py <mcp-url> <token> <calls-json>
"""

import asyncio
import json
import sys

from sdk_session import sdk_session


async def run(url: str, token: str, calls: list) -> dict:
    async with sdk_session(url, {"Authorization": f"Bearer {token}"}) as (session, _):
        listed = await session.list_tools()
        results = []
        for tool, arguments in calls:
            called = await session.call_tool(tool, arguments)
            results.append({"tool": tool, "isError": bool(called.is_error), "output": called.structured_content})
        return {"tools": sorted(t.name for t in listed.tools), "results": results}


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    url, token, calls = sys.argv[1:]
    print(json.dumps(asyncio.run(run(url, token, json.loads(calls))), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
