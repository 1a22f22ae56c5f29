# The MCP clients for tests/mcp/official_clients.rs, from the package registries:
# the official MCP Python SDK (`mcp` on PyPI) in a venv and the official
# TypeScript SDK (`@modelcontextprotocol/sdk` on npm), both kept under
# target/mcp-clients so a later run reuses them. Sourced by .ci/run before
# `cargo test --all-features`, which then runs the MCP tests and fails if a
# client is missing (CLAUDE_MEMORY_REQUIRE_MCP=1).
mcp_clients="$PWD/target/mcp-clients"
mkdir -p "$mcp_clients"
echo "== MCP clients (Python SDK, TypeScript SDK) in $mcp_clients"
if ! "$mcp_clients/py/bin/python" -c "import mcp" >/dev/null 2>&1; then
  python3 -m venv "$mcp_clients/py"
  "$mcp_clients/py/bin/pip" install --quiet --disable-pip-version-check "mcp==2.3.0"
fi
if [ ! -d "$mcp_clients/node/node_modules/@modelcontextprotocol/sdk" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
  fi
  mkdir -p "$mcp_clients/node"
  [ -f "$mcp_clients/node/package.json" ] || echo '{"name":"mcp-clients","private":true}' >"$mcp_clients/node/package.json"
  npm install --prefix "$mcp_clients/node" --silent --no-audit --no-fund @modelcontextprotocol/sdk@1.32.2
fi
"$mcp_clients/py/bin/python" -c "import importlib.metadata as m; print('mcp (Python SDK)', m.version('mcp'))"
node -e "console.log('@modelcontextprotocol/sdk', require('$mcp_clients/node/node_modules/@modelcontextprotocol/sdk/package.json').version)"
export CLAUDE_MEMORY_MCP_CLIENTS="$mcp_clients"
export CLAUDE_MEMORY_REQUIRE_MCP=1
