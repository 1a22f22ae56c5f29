#!/usr/bin/env python3
"""Prints the crate/floor ratio table from the last `cargo bench -p claude-memory-bench --bench commands` run.

Reads criterion's estimates (median) under target/criterion and prints, for
each operation, the in-memory time, the filesystem time, the raw std::fs floor
and their ratio, durable and without fsync.
"""
import json
import pathlib
import sys

root = pathlib.Path(__file__).resolve().parent.parent.parent / "target" / "criterion"
ops = ["view", "view_range", "create", "str_replace", "insert", "rename", "delete"]


def median(op, name):
    f = root / op / name / "new" / "estimates.json"
    if not f.exists():
        return None
    return json.loads(f.read_text())["median"]["point_estimate"] / 1000.0  # µs


def fmt(us):
    return "-" if us is None else (f"{us:.2f} µs" if us < 100 else f"{us:.0f} µs")


def ratio(a, b):
    return "-" if a is None or b is None else f"{a / b:.2f}x"


rows = []
for op in ops:
    mem = median(op, "in-memory")
    fd, ff = median(op, "filesystem durable"), median(op, "floor durable")
    nd, nf = median(op, "filesystem no-fsync"), median(op, "floor no-fsync")
    rows.append((op, fmt(mem), fmt(fd), fmt(ff), ratio(fd, ff), fmt(nd), fmt(nf), ratio(nd, nf)))
if all(r[1] == "-" for r in rows):
    sys.exit("no results: run `cargo bench -p claude-memory-bench --bench commands` first")
head = ("operation", "in-memory", "fs durable", "floor durable", "ratio", "fs no-fsync", "floor no-fsync", "ratio")
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for r in rows:
    print("| " + " | ".join(r) + " |")
