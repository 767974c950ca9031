"""A client configured the way `world-core up` tells an operator to, for tests/tests/up.rs: the
official MCP Python SDK connects with the URL and header of a pasted configuration, lists the
tools and calls one, and prints what it saw as one JSON object on stdout.

usage:
  pasted_config.py TOOL ARGUMENTS-JSON mcp-json FILE
      FILE is a .mcp.json; `${VAR}` in its url and headers is expanded from the environment,
      as Claude Code does, so the test runs this after the printed `export` line.
  pasted_config.py TOOL ARGUMENTS-JSON claude mcp add --transport http NAME URL --header "K: V" …
      the arguments a shell passed to `claude` when it ran the printed command.
"""

import asyncio
import json
import os
import sys

from sdk_session import sdk_session


def from_mcp_json(path: str) -> tuple[str, dict]:
    with open(path, encoding="utf-8") as file:
        server = json.load(file)["mcpServers"]["world"]
    assert server["type"] == "http", server
    headers = {name: os.path.expandvars(value) for name, value in server.get("headers", {}).items()}
    unexpanded = [value for value in headers.values() if "$" in value]
    assert not unexpanded, f"unexpanded variables in the headers: {unexpanded}"
    return os.path.expandvars(server["url"]), headers


def from_claude_args(args: list) -> tuple[str, dict]:
    assert args[:2] == ["mcp", "add"], args
    rest = args[2:]
    positional, headers, transport = [], {}, None
    while rest:
        word = rest.pop(0)
        if word == "--transport":
            transport = rest.pop(0)
        elif word == "--header":
            name, _, value = rest.pop(0).partition(":")
            headers[name.strip()] = value.strip()
        else:
            positional.append(word)
    assert transport == "http", args
    assert len(positional) == 2, positional
    return positional[1], headers


async def run(url: str, headers: dict, tool: str, arguments: dict) -> dict:
    async with sdk_session(url, headers) as (session, _):
        listed = await session.list_tools()
        called = await session.call_tool(tool, arguments)
        return {
            "url": url,
            "tools": sorted(t.name for t in listed.tools),
            "isError": bool(called.is_error),
            "output": called.structured_content,
        }


def main() -> int:
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    tool, arguments, kind = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    if kind == "mcp-json":
        url, headers = from_mcp_json(sys.argv[4])
    elif kind == "claude":
        url, headers = from_claude_args(sys.argv[4:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    print(json.dumps(asyncio.run(run(url, headers, tool, arguments)), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
