// Drives claude-memory's MCP server with the official MCP TypeScript SDK.
//
//   node client.mjs CALLS.json --stdio CMD ARG...
//   node client.mjs CALLS.json --http URL [--token T]
//
// Runs the calls in order and prints one JSON document: the server's
// instructions, its tools, and each call's result (or protocol error).
// The Rust test (tests/mcp.rs) checks every string.
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const argv = process.argv.slice(2);
const calls = JSON.parse(readFileSync(argv[0], "utf8"));
let transport;
const stdio = argv.indexOf("--stdio");
if (stdio >= 0) {
  const [command, ...args] = argv.slice(stdio + 1);
  transport = new StdioClientTransport({ command, args, stderr: "inherit" });
} else {
  const url = argv[argv.indexOf("--http") + 1];
  const t = argv.indexOf("--token");
  const headers = t >= 0 ? { Authorization: `Bearer ${argv[t + 1]}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
}
const client = new Client({ name: "typescript-sdk-test", version: "1" });
await client.connect(transport);
const out = { instructions: client.getInstructions(), results: [] };
out.tools = (await client.listTools()).tools;
for (const call of calls) {
  try {
    out.results.push(await client.callTool({ name: call.name, arguments: call.arguments }));
  } catch (e) {
    out.results.push({ protocol_error: { code: e.code, message: e.message } });
  }
}
console.log(JSON.stringify(out));
await client.close();
