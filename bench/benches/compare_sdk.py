#!/usr/bin/env python3
"""claude-memory against the official SDK handlers, on one workload.

    pip install anthropic
    npm install --prefix bench/benches/.node @anthropic-ai/sdk     # optional
    python3 bench/benches/compare_sdk.py                           # from the repository root

Builds a mixed workload (about 1,000 small files in 10 directories, then
views, view_range in a 1 MB file, directory views, str_replace, insert,
create, rename and delete), runs it through the Python SDK's
BetaLocalFilesystemMemoryTool (and, if installed, the TypeScript SDK's) and
through this crate's FilesystemStore, each with its default durability, and
prints time per category and the speed-up. Run by hand, not in CI.
"""
import json
import pathlib
import random
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent.parent


def workload(seed=7, mixed_ops=6000):
    rnd = random.Random(seed)
    steps = []
    files = []  # (path, id of the note it holds)

    def note(i):
        return "".join(f"- memory fact {i}.{k}: the customer prefers email\n" for k in range(10))

    for d in range(10):
        for i in range(100):
            p = f"/memories/dir{d}/note{i}.md"
            files.append((p, i))
            steps.append(("create", {"command": "create", "path": p, "file_text": note(i)}))
    big = "".join(f"log line {i:07d} {'x' * 40}\n" for i in range(17_500))  # ~1 MB, under the 1 MiB limit
    steps.append(("create", {"command": "create", "path": "/memories/big/log.md", "file_text": big}))
    n_big = big.count("\n")
    fresh = 0
    for _ in range(mixed_ops):
        r = rnd.random()
        f, fid = rnd.choice(files)
        if r < 0.35:
            steps.append(("view", {"command": "view", "path": f}))
        elif r < 0.45:
            start = rnd.randint(1, n_big - 50)
            steps.append(("view_range (1 MB file)", {"command": "view", "path": "/memories/big/log.md", "view_range": [start, start + 40]}))
        elif r < 0.50:
            d = rnd.randrange(10)
            p = "/memories" if rnd.random() < 0.2 else f"/memories/dir{d}"
            steps.append(("directory view", {"command": "view", "path": p}))
        elif r < 0.65:
            k = rnd.randrange(10)
            steps.append(("str_replace", {"command": "str_replace", "path": f, "old_str": f"fact {fid}.{k}:", "new_str": f"fact {fid}.{k} (edited):"}))
        elif r < 0.75:
            steps.append(("insert", {"command": "insert", "path": f, "insert_line": rnd.randint(0, 10), "insert_text": "an inserted line"}))
        elif r < 0.83:
            fresh += 1
            p = f"/memories/dir{rnd.randrange(10)}/new{fresh}.md"
            files.append((p, fresh))
            steps.append(("create", {"command": "create", "path": p, "file_text": note(fresh)}))
        elif r < 0.91:
            fresh += 1
            p = f.replace(".md", f"_r{fresh}.md")
            files.remove((f, fid))
            files.append((p, fid))
            steps.append(("rename", {"command": "rename", "old_path": f, "new_path": p}))
        else:
            files.remove((f, fid))
            steps.append(("delete", {"command": "delete", "path": f}))
    return steps


def run_python(steps, base):
    from anthropic.lib.tools._beta_builtin_memory_tool import BetaLocalFilesystemMemoryTool

    tool = BetaLocalFilesystemMemoryTool(base_path=str(base))
    spent = {}
    for category, inp in steps:
        start = time.perf_counter()
        error = 0
        try:
            tool.call(inp)
        except Exception:
            error = 1
        took = time.perf_counter() - start
        s = spent.setdefault(category, {"seconds": 0.0, "ops": 0, "errors": 0})
        s["seconds"] += took
        s["ops"] += 1
        s["errors"] += error
    return spent


def run_rust(steps, root, work):
    path = work / "workload.jsonl"
    path.write_text("".join(json.dumps({"category": c, "input": i}) + "\n" for c, i in steps))
    subprocess.run(["cargo", "bench", "-p", "claude-memory-bench", "--bench", "sdk_workload", "--no-run", "-q"], cwd=REPO, check=True)
    out = subprocess.run(
        ["cargo", "bench", "-q", "-p", "claude-memory-bench", "--bench", "sdk_workload", "--", "--workload", str(path), "--root", str(root)],
        cwd=REPO, check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_node(steps, base, work):
    node_modules = REPO / "bench" / "benches" / ".node" / "node_modules"
    if not (node_modules / "@anthropic-ai" / "sdk").exists():
        return None
    path = work / "workload.jsonl"
    out = subprocess.run(
        ["node", str(REPO / "benches" / "sdk_workload.cjs"), str(path), str(base)],
        check=True, capture_output=True, text=True, env={"NODE_PATH": str(node_modules), "PATH": "/usr/bin:/usr/local/bin:/bin"},
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def table(name, other, rust, steps):
    cats = ["create", "view", "view_range (1 MB file)", "directory view", "str_replace", "insert", "rename", "delete"]
    print(f"\n{'category':24} {'ops':>6} {name:>14} {'claude-memory':>14} {'speed-up':>9}")
    tot_o = tot_r = read_o = read_r = 0.0
    for c in cats:
        if c not in other:
            continue
        o, r = other[c]["seconds"], rust[c]["seconds"]
        tot_o += o
        tot_r += r
        if c in ("view", "view_range (1 MB file)", "directory view"):
            read_o += o
            read_r += r
        print(f"{c:24} {other[c]['ops']:>6} {o * 1000:>12.1f}ms {r * 1000:>12.1f}ms {o / r:>8.1f}x"
              f"   (errors: {other[c]['errors']} / {rust[c]['errors']})")
    print(f"{'reads':24} {'':>6} {read_o * 1000:>12.1f}ms {read_r * 1000:>12.1f}ms {read_o / read_r:>8.1f}x")
    print(f"{'overall':24} {len(steps):>6} {tot_o * 1000:>12.1f}ms {tot_r * 1000:>12.1f}ms {tot_o / tot_r:>8.1f}x")


def main():
    steps = workload()
    (REPO / "target").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=REPO / "target") as tmp:
        work = pathlib.Path(tmp)
        rust = run_rust(steps, work / "rust" / "memories", work)
        py = run_python(steps, work / "python")
        node = run_node(steps, work / "node", work)
    table("python SDK", py, rust, steps)
    if node is None:
        print("\n(TypeScript SDK not installed: npm install --prefix bench/benches/.node @anthropic-ai/sdk)")
    else:
        table("TypeScript SDK", node, rust, steps)


if __name__ == "__main__":
    sys.exit(main())
