"""Our sync and the SDK's, on two folders and one memory store, converge.

Usage: converge.py BASE_URL KEY CLAUDE_MEMORY_BIN

Folder A is synced by this crate's CLI (`claude-memory --store A sync
managed:ID --once`), folder B by the official Python SDK's engine
(`SessionMemoryStores` in anthropic/lib/tools/_memories.py, driven as
sdk_check.py drives it: a stand-in session holding one real resource, and
its last-sync clock backdated so each `sync_if_due` runs at once). Both
folders and the API then change the store; after a few rounds of both
syncs, A, B and the store hold the same files. Run by
tests/managed/sync.rs, which knows where the CLI binary is.
"""

import asyncio
import logging
import os
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import anthropic
from anthropic.lib.tools._memories import MARKER_PATH, SessionMemoryStores
from anthropic.types.beta.sessions import BetaManagedAgentsMemoryStoreResource

BASE, KEY, BIN = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3]


def fail(what):
    print(f"FAIL  {what}", file=sys.stderr)
    sys.exit(1)


def files(root):
    """Every file below root but the sync's own (marker, state, lock)."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_file() and rel != MARKER_PATH and not rel.startswith(".claude-memory"):
            out[rel] = p.read_text()
    return out


def ours(a, sid):
    """One pass of this crate's sync over folder A; its output."""
    env = dict(os.environ, ANTHROPIC_API_KEY=KEY, ANTHROPIC_BASE_URL=BASE)
    r = subprocess.run([BIN, "--store", str(a), "sync", f"managed:{sid}", "--once"],
                       env=env, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail(f"claude-memory sync exited {r.returncode}: {r.stdout}{r.stderr}")
    return r.stdout


async def main():
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        os.environ.pop(var, None)
    logging.getLogger("anthropic.lib.tools.agent_toolset").setLevel(logging.ERROR)
    c = anthropic.Anthropic(api_key=KEY, base_url=BASE)
    mem = c.beta.memory_stores.memories
    sid = c.beta.memory_stores.create(name="converge").id
    mem.create(sid, path="/seed.md", content="seed\n")
    mem.create(sid, path="/dir/one.md", content="one\n")
    aclient = anthropic.AsyncAnthropic(api_key=KEY, base_url=BASE)

    with tempfile.TemporaryDirectory() as tmp:
        a = Path(tmp) / "a"
        b = Path(tmp) / "mnt" / "b"
        a.mkdir()
        resource = BetaManagedAgentsMemoryStoreResource.model_validate(
            {"type": "memory_store", "memory_store_id": sid, "access": "read_write", "name": "b",
             "mount_path": str(b)})
        engine = SessionMemoryStores(aclient, workdir=tmp, sync_interval=5.0)

        async def theirs():
            engine._last_sync = 0.0
            await engine.sync_if_due()

        async def rounds(n=3):
            for _ in range(n):
                ours(a, sid)
                await theirs()

        def store():
            return {m.path.lstrip("/"): mem.retrieve(m.id, memory_store_id=sid).content
                    for m in mem.list(sid, limit=100) if m.type == "memory"}

        def converged(what):
            fa, fb, fs = files(a), files(b), store()
            if not (fa == fb == fs):
                fail(f"{what}: not converged\n  ours:   {fa}\n  SDK's:  {fb}\n  store:  {fs}")
            print(f"  ok  {what}: {len(fa)} files alike in both folders and the store")
            return fa

        await engine.download(types.SimpleNamespace(id="sesn_local", resources=[resource]))
        first = ours(a, sid)
        if "first sync" not in first:
            fail(f"the first pass says it joined: {first}")
        converged("after the first syncs")

        # Changes on every side, each to its own path.
        (a / "from-ours.md").write_text("written in A\n")
        (a / "seed.md").write_text("seed, edited in A\n")
        (b / "from-sdk").mkdir()
        (b / "from-sdk/b.md").write_text("written in B\n")
        (b / "dir/one.md").write_text("one, edited in B\n")
        mem.create(sid, path="/from-api.md", content="written through the API\n")
        await rounds()
        got = converged("after edits in A, in B and through the API")
        if got.get("seed.md") != "seed, edited in A\n" or got.get("dir/one.md") != "one, edited in B\n":
            fail(f"an edit was lost: {got}")

        # Deletions: through the API; in B (its engine's last sync sends
        # them at once); in A (ours waits 30 s of absence, as the SDK does).
        listed = {m.path: m for m in mem.list(sid, limit=100)}
        mem.delete(listed["/from-api.md"].id, memory_store_id=sid)
        (b / "from-sdk/b.md").unlink()
        (a / "from-ours.md").unlink()
        ours(a, sid)
        await engine.finish()
        if "from-ours.md" not in store():
            fail("ours sent a delete before the file had been missing for 30 s")
        time.sleep(31)
        ours(a, sid)
        for _ in range(2):
            ours(a, sid)
        # The engine has run its last sync: B is left as finish() made it,
        # so B's view of A's delete comes from a fresh engine's download.
        got = files(a)
        if got != store():
            fail(f"A and the store differ after the deletes: {got} vs {store()}")
        for gone in ("from-api.md", "from-sdk/b.md", "from-ours.md"):
            if gone in got:
                fail(f"{gone} should be deleted everywhere: {got}")
        await engine.dispose()
        engine2 = SessionMemoryStores(aclient, workdir=tmp, sync_interval=5.0)
        await engine2.download(types.SimpleNamespace(id="sesn_local2", resources=[resource]))
        engine = engine2
        converged("after deletions through the API, in B and in A")
        await engine2.dispose()
    await aclient.close()
    print("converge: ours and the SDK's sync agree")


if __name__ == "__main__":
    asyncio.run(main())
