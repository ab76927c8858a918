"""A real MCP client (the official Python SDK, PyPI `mcp`) for crates/cli/tests/mcp.rs.

Usage:
  client.py stdio BINARY [ARG...]    starts BINARY ARG... and speaks MCP over its stdio
  client.py http URL                 the streamable-HTTP endpoint URL; the bearer token
                                     is read from $MCP_TOKEN (none when unset)

Reads the calls to make from stdin, a JSON list of {"tool": NAME, "arguments": {...}},
and prints one JSON document on stdout: the server's name and instructions, every
listed tool (name, inputSchema, annotations), and per call its isError flag, its
structuredContent and its text. The Rust test checks that document.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamablehttp_client


async def session_work(session, calls):
    init = await session.initialize()
    listed = await session.list_tools()
    out = {
        "server": {
            "name": init.serverInfo.name,
            "version": init.serverInfo.version,
            "instructions": init.instructions,
        },
        "tools": [
            {
                "name": t.name,
                "inputSchema": t.inputSchema,
                "annotations": t.annotations.model_dump(exclude_none=True)
                if t.annotations
                else None,
            }
            for t in listed.tools
        ],
        "calls": [],
    }
    for call in calls:
        result = await session.call_tool(call["tool"], call.get("arguments") or {})
        texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
        out["calls"].append(
            {
                "tool": call["tool"],
                "isError": bool(result.isError),
                "structured": result.structuredContent,
                "text": "\n".join(texts),
            }
        )
    return out


async def main():
    mode = sys.argv[1]
    calls = json.load(sys.stdin)
    if mode == "stdio":
        params = StdioServerParameters(
            command=sys.argv[2], args=sys.argv[3:], env=dict(os.environ)
        )
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                out = await session_work(session, calls)
    elif mode == "http":
        token = os.environ.get("MCP_TOKEN")
        headers = {"Authorization": f"Bearer {token}"} if token else None
        async with streamablehttp_client(sys.argv[2], headers=headers) as (read, write, _):
            async with ClientSession(read, write) as session:
                out = await session_work(session, calls)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    json.dump(out, sys.stdout)


asyncio.run(main())
