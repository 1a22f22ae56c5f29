"""Drives claude-memory's MCP server with the official MCP Python SDK.

  client.py calls CALLS.json (--stdio CMD ARG... | --http URL) [--token T] [--mode legacy|auto]
      runs the calls in order, prints one JSON document: the server's
      instructions, its tools, and each call's result (or protocol error).
  client.py load --http URL --token T --clients 8 --calls 200
      8 clients, 200 mixed calls each, inserting unique lines into one
      file; prints lost updates and latency percentiles as JSON.

The Rust test (tests/mcp.rs) checks every string.
"""

import argparse
import asyncio
import json
import sys
import time

import httpx2
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import Implementation


def dump_result(result):
    return json.loads(result.model_dump_json(by_alias=True, exclude_none=True))


def make_client(args, name="python-sdk-test"):
    info = Implementation(name=name, version="1")
    if args.stdio:
        server = StdioServerParameters(command=args.stdio[0], args=args.stdio[1:])
    else:
        headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
        http = httpx2.AsyncClient(headers=headers, timeout=60)
        server = streamable_http_client(args.http, http_client=http)
    return Client(server, mode=args.mode, client_info=info)


async def run_calls(args):
    calls = json.load(open(args.calls))
    out = {"results": []}
    async with make_client(args) as client:
        out["instructions"] = client.session.instructions
        tools = await client.list_tools()
        out["tools"] = [json.loads(t.model_dump_json(by_alias=True, exclude_none=True)) for t in tools.tools]
        for call in calls:
            try:
                result = await client.call_tool(call["name"], call.get("arguments"))
                out["results"].append(dump_result(result))
            except MCPError as e:
                out["results"].append({"protocol_error": {"code": e.error.code, "message": e.error.message}})
    print(json.dumps(out))


async def one_client(args, k, latencies, inserted, failures):
    async with make_client(args, name=f"load-{k}") as client:
        for i in range(args.calls):
            kind = i % 4
            if kind == 0 or kind == 1:
                line = f"c{k}-{i}"
                arguments = {"command": "insert", "path": "/memories/load.md", "insert_line": 0, "insert_text": line}
            elif kind == 2:
                arguments = {"command": "view", "path": "/memories/load.md", "view_range": [1, 5]}
            else:
                arguments = {"command": "create", "path": f"/memories/c{k}/n{i}.md", "file_text": f"note {i}\n"}
            t0 = time.perf_counter()
            result = await client.call_tool("memory", arguments)
            latencies.append(time.perf_counter() - t0)
            if result.is_error:
                failures.append(result.content[0].text)
            elif arguments["command"] == "insert":
                inserted.add(arguments["insert_text"])


async def run_load(args):
    async with make_client(args, name="load-setup") as client:
        await client.call_tool("memory", {"command": "create", "path": "/memories/load.md", "file_text": ""})
    latencies, inserted, failures = [], set(), []
    t0 = time.perf_counter()
    await asyncio.gather(*(one_client(args, k, latencies, inserted, failures) for k in range(args.clients)))
    wall = time.perf_counter() - t0
    async with make_client(args, name="load-check") as client:
        lines, start = set(), 1
        while True:
            view = await client.call_tool("memory", {"command": "view", "path": "/memories/load.md", "view_range": [start, -1]})
            text = view.content[0].text
            if view.is_error:
                break
            body = text.split("\n")[1:]
            numbered = [l for l in body if "\t" in l and not l.startswith("[Output truncated")]
            if not numbered:
                break
            for l in numbered:
                lines.add(l.split("\t", 1)[1])
            last = int(numbered[-1].split("\t", 1)[0])
            if "[Output truncated" not in text:
                break
            start = last + 1
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000
    print(json.dumps({
        "calls": len(latencies),
        "errors": failures[:5],
        "error_count": len(failures),
        "inserted": len(inserted),
        "lost": len(inserted - lines),
        "extra": len(lines - inserted),
        "p50_ms": round(pick(0.50), 2),
        "p99_ms": round(pick(0.99), 2),
        "wall_s": round(wall, 2),
    }))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["calls", "load"])
    p.add_argument("calls", nargs="?")
    p.add_argument("--http")
    p.add_argument("--token")
    p.add_argument("--mode", default="auto")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--calls-per-client", dest="calls_n", type=int, default=200)
    p.add_argument("--stdio", nargs=argparse.REMAINDER)
    args = p.parse_args()
    if args.what == "calls":
        asyncio.run(run_calls(args))
    else:
        args.calls = args.calls_n
        asyncio.run(run_load(args))


if __name__ == "__main__":
    sys.exit(main())
