#!/usr/bin/env python3
"""Checks the memory stores emulator with Anthropic's official Python SDK.

    python3 tests/managed/sdk_check.py http://127.0.0.1:55520 test-key

Needs anthropic==2.14.0. Exits non-zero on the first failure and prints
each check as it passes.

Part 1 calls every memory store, memory and memory version endpoint through
`client.beta.memory_stores` and validates each raw JSON answer strictly
against the SDK's own pydantic types (strict JSON mode: no str-to-int or
similar coercion), and also checks that every field the type declares is
present and no other field is: a missing, extra or mistyped field fails.
It checks the errors too (400, 401, 404, 409 with the SDK's ConflictError,
429 with retry-after, retried by the SDK) using the emulator's controls.

Part 2 drives the SDK's own sync engine, `SessionMemoryStores` in
anthropic/lib/tools/_memories.py (the environment worker's memory download
and sync), against a store on the emulator. The engine needs no session
service: `download(session)` reads only `session.resources` (each with
`type`, `memory_store_id`, `mount_path`, `access`, `name`), so a stand-in
object holding one real `BetaManagedAgentsMemoryStoreResource` is enough.
Its syncs run on a cadence (`sync_if_due`, at least 5 s apart); the check
backdates the engine's last-sync clock (`_last_sync`, a private field) so
each `sync_if_due` runs at once instead of sleeping. Every other call is the
engine's public surface: `download`, `sync_if_due`, `flush_writes`,
`finish`, `dispose`.
"""

import asyncio
import hashlib
import json
import logging
import os
import sys
import tempfile
import traceback
import types
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import anthropic
from pydantic import TypeAdapter

from anthropic.lib.tools._memories import MARKER_PATH, SessionMemoryStores
from anthropic.types.beta import BetaManagedAgentsDeletedMemoryStore, BetaManagedAgentsMemoryStore
from anthropic.types.beta.memory_stores import (
    BetaManagedAgentsAPIActor,
    BetaManagedAgentsDeletedMemory,
    BetaManagedAgentsMemory,
    BetaManagedAgentsMemoryPrefix,
    BetaManagedAgentsMemoryVersion,
    BetaManagedAgentsSessionActor,
)
from anthropic.types.beta.sessions import BetaManagedAgentsMemoryStoreResource
from anthropic.types.shared import ErrorResponse

BASE, KEY = sys.argv[1].rstrip("/"), sys.argv[2]
EXPECTED_SDK = "2.14.0"
checks = 0


def ok(what):
    global checks
    checks += 1
    print(f"  ok  {what}")


def fail(what):
    print(f"FAIL  {what}", file=sys.stderr)
    sys.exit(1)


def expect(cond, what):
    if not cond:
        fail(what)
    ok(what)


# ---- strict validation against the SDK's types ----

ACTORS = {"api_actor": BetaManagedAgentsAPIActor, "session_actor": BetaManagedAgentsSessionActor}


def exact_keys(model, obj, where):
    fields = {f.alias or name for name, f in model.model_fields.items()}
    if set(obj) != fields:
        fail(f"{where}: fields {sorted(set(obj))} != {model.__name__}'s {sorted(fields)}")


def strict(model, obj, where):
    """Validate one JSON object strictly as `model`; returns the parsed model."""
    try:
        parsed = TypeAdapter(model).validate_json(json.dumps(obj), strict=True)
    except Exception as e:
        fail(f"{where}: not a valid {model.__name__}: {e}")
    exact_keys(model, obj, where)
    for actor_field in ("created_by", "redacted_by"):
        actor = obj.get(actor_field) if model is BetaManagedAgentsMemoryVersion else None
        if actor is not None:
            if actor.get("type") not in ACTORS:
                fail(f"{where}.{actor_field}: unexpected actor {actor}")
            exact_keys(ACTORS[actor["type"]], actor, f"{where}.{actor_field}")
    return parsed


def item_model(obj):
    return BetaManagedAgentsMemoryPrefix if obj.get("type") == "memory_prefix" else BetaManagedAgentsMemory


def raw_one(model, raw, where):
    """A raw SDK response holding one object of `model`."""
    if not raw.headers.get("request-id"):
        fail(f"{where}: no request-id header")
    return strict(model, raw.http_response.json(), where)


def raw_page(model, raw, where):
    """A raw SyncPageCursor response: {"data": [...], "next_page": str|null}; `model` is
    the items' type, or a function choosing it per item."""
    body = raw.http_response.json()
    if set(body) != {"data", "next_page"} or not isinstance(body["data"], list):
        fail(f"{where}: page is not {{data, next_page}}: {sorted(body)}")
    if body["next_page"] is not None and not isinstance(body["next_page"], str):
        fail(f"{where}: next_page is neither a string nor null")
    items = [strict(model if isinstance(model, type) else model(o), o, where) for o in body["data"]]
    return items, body["next_page"]


def sha(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def raises(exc_type, fn, where, error_type=None):
    """`fn()` must raise `exc_type` with Anthropic's error shape; returns (error body, response)."""
    try:
        fn()
    except exc_type as e:
        full = e.response.json()
        if full.get("type") != "error" or not isinstance(full.get("error"), dict):
            fail(f"{where}: error body is not {{type: error, error: {{...}}}}: {full}")
        if not e.response.headers.get("request-id"):
            fail(f"{where}: error response has no request-id header")
        etype = full["error"].get("type")
        if etype in ("invalid_request_error", "authentication_error", "not_found_error", "rate_limit_error",
                     "api_error", "overloaded_error"):
            TypeAdapter(ErrorResponse).validate_json(json.dumps(full), strict=True)
        if error_type is not None and etype != error_type:
            fail(f"{where}: error type {etype!r}, expected {error_type!r}")
        ok(f"{where} -> {e.status_code} {etype}")
        return full, e.response
    except Exception as e:
        fail(f"{where}: raised {type(e).__name__} ({e}), expected {exc_type.__name__}")
    fail(f"{where}: succeeded, expected {exc_type.__name__}")


def control(method, path, body=None):
    req = urllib.request.Request(BASE + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as resp:
        return json.loads(resp.read())


def requests_for(sid):
    return control("GET", f"/_emulator/requests?memory_store_id={sid}")["count"]


# ---- part 1: every endpoint through the SDK ----

def check_endpoints():
    c = anthropic.Anthropic(api_key=KEY, base_url=BASE, max_retries=0)
    ms, mem, ver = c.beta.memory_stores, c.beta.memory_stores.memories, c.beta.memory_stores.memory_versions
    M, V = BetaManagedAgentsMemory, BetaManagedAgentsMemoryVersion
    print("memory stores")
    before = datetime.now(timezone.utc) - timedelta(seconds=1)
    s = raw_one(BetaManagedAgentsMemoryStore, ms.with_raw_response.create(
        name="SDK check", description="checked by sdk_check.py", metadata={"a": "1", "b": "2"}), "create store")
    expect(s.id.startswith("memstore_") and s.archived_at is None and s.metadata == {"a": "1", "b": "2"},
           "create store: memstore_ id, metadata, not archived")
    got = raw_one(BetaManagedAgentsMemoryStore, ms.with_raw_response.retrieve(s.id), "retrieve store")
    expect(got == s, "retrieve store returns what create did")
    up = raw_one(BetaManagedAgentsMemoryStore, ms.with_raw_response.update(
        s.id, name="SDK check 2", metadata={"a": None, "c": "3"}), "update store")
    expect(up.name == "SDK check 2" and up.metadata == {"b": "2", "c": "3"} and up.updated_at > s.updated_at,
           "update store: name, metadata merge (null removes), updated_at moves")
    other = ms.create(name="to archive")
    listed, nxt = raw_page(BetaManagedAgentsMemoryStore, ms.with_raw_response.list(limit=1), "list stores")
    expect(len(listed) == 1 and nxt is not None, "list stores limit=1: one item and a next_page")
    all_ids = [x.id for x in ms.list(limit=1)]  # the SDK follows next_page
    expect(s.id in all_ids and other.id in all_ids and len(all_ids) == len(set(all_ids)),
           "list stores: auto-pagination reaches both stores, no repeats")
    expect(s.id in [x.id for x in ms.list(created_at_gte=before)] and
           s.id not in [x.id for x in ms.list(created_at_lte=before)], "list stores: created_at[gte]/[lte] filters")
    arch = raw_one(BetaManagedAgentsMemoryStore, ms.with_raw_response.archive(other.id), "archive store")
    expect(arch.archived_at is not None, "archive store sets archived_at")
    expect(ms.archive(other.id).archived_at == arch.archived_at, "archive again returns it unchanged")
    expect(other.id not in [x.id for x in ms.list()] and other.id in [x.id for x in ms.list(include_archived=True)],
           "list stores hides archived unless include_archived=true")
    raises(anthropic.BadRequestError, lambda: mem.create(other.id, path="/x.md", content="x"),
           "create memory in archived store")
    raises(anthropic.BadRequestError, lambda: ms.update(other.id, name="n"), "update archived store")
    raw_one(BetaManagedAgentsDeletedMemoryStore, ms.with_raw_response.delete(other.id), "delete store")
    raises(anthropic.NotFoundError, lambda: ms.retrieve(other.id), "retrieve deleted store")
    raises(anthropic.BadRequestError, lambda: ms.create(name=""), "create store with empty name")

    print("memories")
    sid = s.id
    a = raw_one(M, mem.with_raw_response.create(sid, path="/notes/a.md", content="alpha\n"), "create memory")
    expect(a.id.startswith("mem_") and a.memory_version_id.startswith("memver_") and a.content is None,
           "create memory: mem_/memver_ ids, view defaults to basic (content null)")
    expect(a.content_sha256 == sha("alpha\n") and a.content_size_bytes == 6 and a.memory_store_id == sid,
           "create memory: content_sha256 and content_size_bytes of the UTF-8 content")
    full = raw_one(M, mem.with_raw_response.create(sid, path="/notes/é.md", content="é\n", view="full"),
                   "create memory view=full")
    expect(full.content == "é\n" and full.content_size_bytes == 3, "create view=full returns content; size in bytes")
    body, _ = raises(anthropic.ConflictError, lambda: mem.create(sid, path="/notes/a.md", content="again"),
                     "create at an existing path", "memory_path_conflict_error")
    err = body["error"]
    expect(err.get("conflicting_memory_id") == a.id and err.get("conflicting_path") == "/notes/a.md",
           "the path conflict names conflicting_memory_id and conflicting_path")
    got = raw_one(M, mem.with_raw_response.retrieve(a.id, memory_store_id=sid), "retrieve memory")
    expect(got.content == "alpha\n", "retrieve defaults to view=full")
    expect(mem.retrieve(a.id, memory_store_id=sid, view="basic").content is None, "retrieve view=basic: no content")
    raises(anthropic.NotFoundError, lambda: mem.retrieve("mem_nope", memory_store_id=sid), "retrieve unknown memory")
    raises(anthropic.NotFoundError, lambda: mem.list("memstore_nope"), "list memories of unknown store")

    u = raw_one(M, mem.with_raw_response.update(
        a.id, memory_store_id=sid, content="alpha 2\n",
        precondition={"type": "content_sha256", "content_sha256": a.content_sha256}), "update with precondition")
    expect(u.id == a.id and u.content_sha256 == sha("alpha 2\n") and u.memory_version_id != a.memory_version_id
           and u.content is None, "update: same id, new sha and version, basic view")
    raises(anthropic.ConflictError, lambda: mem.update(
        a.id, memory_store_id=sid, content="lost",
        precondition={"type": "content_sha256", "content_sha256": a.content_sha256}),
        "update with a stale precondition", "memory_precondition_failed_error")
    same = mem.update(a.id, memory_store_id=sid, content="alpha 2\n",
                      precondition={"type": "content_sha256", "content_sha256": a.content_sha256})
    expect(same.memory_version_id == u.memory_version_id,
           "stale precondition but the state already matches: 200, no new version")
    expect(mem.update(a.id, memory_store_id=sid, content="alpha 2\n").memory_version_id == u.memory_version_id,
           "update that changes nothing makes no version")
    r = mem.update(a.id, memory_store_id=sid, path="/notes/b.md", view="full")
    expect(r.id == a.id and r.path == "/notes/b.md" and r.content == "alpha 2\n", "rename keeps the id")
    raises(anthropic.ConflictError, lambda: mem.update(a.id, memory_store_id=sid, path="/notes/é.md"),
           "rename onto an existing path", "memory_path_conflict_error")

    bad_paths = ["notes/x.md", "/", "/a//b", "/a/./b", "/a/../b", "/a/", "/" + "/".join(["d"] * 21),
                 "/" + "x" * 1024, "/e\u0301.md", "/a\x01b", "/a\u200bb", "/a\u2028b", "/a\u2029b", "/a\x7fb"]
    for p in bad_paths:
        raises(anthropic.BadRequestError, lambda p=p: mem.create(sid, path=p, content="x"), f"bad path {p[:30]!r}")
    mem.create(sid, path="/" + "/".join(["d"] * 20), content="20 segments")
    mem.create(sid, path="/" + "y" * 1023, content="1024 bytes")
    ok("20 segments and 1,024 bytes are allowed")
    raises(anthropic.BadRequestError, lambda: mem.create(sid, path="/big.md", content="x" * 102_401),
           "content of 102,401 bytes")
    raises(anthropic.BadRequestError, lambda: mem.update(a.id, memory_store_id=sid, content="é" * 51_201),
           "update to 102,402 bytes (2-byte chars)")
    expect(mem.create(sid, path="/max.md", content="é" * 51_200).content_size_bytes == 102_400,
           "content of exactly 102,400 bytes is allowed")
    raises(anthropic.BadRequestError, lambda: mem.create(sid, path="/null.md", content=None), "null content")

    print("a full store (2,000 memories)")
    full_sid = ms.create(name="full").id
    for i in range(2000):
        mem.create(full_sid, path=f"/m/{i:04}.md", content="")
    ok("2,000 memories created")
    raises(anthropic.BadRequestError, lambda: mem.create(full_sid, path="/m/2000.md", content=""),
           "the 2,001st memory", "invalid_request_error")
    first = mem.list(full_sid, limit=1).data[0]
    mem.delete(first.id, memory_store_id=full_sid)
    expect(mem.create(full_sid, path="/m/2000.md", content="").path == "/m/2000.md",
           "after a delete there is room for one more")
    expect(len(list(mem.list(full_sid, limit=100))) == 2000, "list pages through all 2,000 (limit=100)")
    ms.delete(full_sid)

    print("the caps and fill controls, and the beta header")
    capped = ms.create(name="capped").id
    control("POST", "/_emulator/fill", {"memory_store_id": capped, "count": 120})
    filled, _ = raw_page(item_model, mem.with_raw_response.list(capped, limit=100), "list a filled store")
    expect(len(list(mem.list(capped, limit=100))) == 120 and filled[0].path == "/d00/f000.md",
           "fill: 120 memories /dNN/fKKK.md, typed as the SDK's memories")
    control("POST", "/_emulator/caps", {"memory_store_id": capped, "memories": 121, "versions": 121})
    one = mem.create(capped, path="/extra.md", content="x")
    raises(anthropic.BadRequestError, lambda: mem.create(capped, path="/over.md", content=""),
           "a create past the memory cap", "invalid_request_error")
    raises(anthropic.BadRequestError, lambda: mem.update(one.id, memory_store_id=capped, content="y"),
           "an update past the version cap (121 versions)", "invalid_request_error")
    mem.delete(one.id, memory_store_id=capped)
    ok("a delete past the version cap is allowed")
    raises(anthropic.BadRequestError, lambda: mem.list(capped, betas=["managed-agents-2026-04-01"]),
           "both betas in one request", "invalid_request_error")
    ms.delete(capped)

    print("listing memories")
    for p in ["/notes/c.md", "/notes/sub/d.md", "/notes/sub/deeper/e.md", "/notes-archive/x.md"]:
        mem.create(sid, path=p, content=p)
    items, nxt = raw_page(item_model, mem.with_raw_response.list(sid, path_prefix="/notes/", limit=100),
                          "list path_prefix=/notes/")
    paths = [i.path for i in items]
    expect(paths == sorted(paths) and nxt is None and "/notes-archive/x.md" not in paths and
           "/notes/sub/deeper/e.md" in paths and all(i.content is None for i in items),
           "list: sorted by path, whole segments only, depth 0 lists everything below, basic view")
    items, _ = raw_page(item_model, mem.with_raw_response.list(sid, path_prefix="/notes/", depth=1),
                        "list depth=1")
    expect([(i.type, i.path) for i in items] == [("memory", "/notes/b.md"), ("memory", "/notes/c.md"),
                                                 ("memory_prefix", "/notes/sub/"), ("memory", "/notes/é.md")],
           "list depth=1: direct children plus memory_prefix roll-ups")
    items, _ = raw_page(item_model, mem.with_raw_response.list(sid, depth=1, limit=100), "list root depth=1")
    expect(("memory_prefix", "/d/") in [(i.type, i.path) for i in items], "list root depth=1 rolls up /d/")
    pages = []
    page = mem.list(sid, limit=2)
    while True:
        pages.append([i.path for i in page.data])
        if not page.has_next_page():
            break
        page = page.get_next_page()
    flat = [p for pg in pages for p in pg]
    expect(len(pages) > 2 and all(len(pg) <= 2 for pg in pages) and flat == sorted(flat) and
           len(flat) == len(set(flat)) == len(list(mem.list(sid, limit=100))),
           f"list limit=2 pages through {len(flat)} memories in {len(pages)} pages, no gaps or repeats")
    items, _ = raw_page(item_model, mem.with_raw_response.list(sid, path_prefix="/notes/", view="full"),
                        "list view=full")
    expect(all(i.content is not None for i in items if i.type == "memory"), "list view=full includes content")
    for kw, what in [({"path_prefix": "/notes"}, "path_prefix without trailing /"), ({"limit": 0}, "limit=0"),
                     ({"limit": 101}, "limit=101"), ({"limit": 21, "view": "full"}, "limit=21 with view=full"),
                     ({"depth": -1}, "depth=-1"), ({"page": "garbage"}, "a bad page cursor")]:
        raises(anthropic.BadRequestError, lambda kw=kw: mem.list(sid, **kw), f"list with {what}")

    print("deleting memories")
    c_mem = next(i for i in mem.list(sid, path_prefix="/notes/") if i.path == "/notes/c.md")
    raises(anthropic.ConflictError, lambda: mem.delete(c_mem.id, memory_store_id=sid, expected_content_sha256="0" * 64),
           "delete with a stale expected_content_sha256", "memory_precondition_failed_error")
    d = raw_one(BetaManagedAgentsDeletedMemory, mem.with_raw_response.delete(
        c_mem.id, memory_store_id=sid, expected_content_sha256=c_mem.content_sha256), "delete memory")
    expect(d.id == c_mem.id and d.type == "memory_deleted", "delete returns {id, type: memory_deleted}")
    raises(anthropic.NotFoundError, lambda: mem.retrieve(c_mem.id, memory_store_id=sid), "retrieve deleted memory")

    print("memory versions")
    vs, _ = raw_page(V, ver.with_raw_response.list(sid, memory_id=a.id), "list versions of one memory")
    expect([v.operation for v in vs] == ["modified", "modified", "created"] and
           all(v.content is None and v.content_sha256 for v in vs), "versions newest first, basic view by default")
    expect(vs[0].id == r.memory_version_id and vs[2].path == "/notes/a.md" and vs[0].path == "/notes/b.md",
           "versions record the path at each write; the newest is the memory's memory_version_id")
    expect(all(isinstance(v.created_by, BetaManagedAgentsAPIActor) and v.created_by.api_key_id.startswith("apikey_")
               for v in vs), "created_by is an api_actor with an api_key_id")
    dv, _ = raw_page(V, ver.with_raw_response.list(sid, memory_id=c_mem.id, view="full"), "versions of deleted")
    expect([v.operation for v in dv] == ["deleted", "created"] and dv[0].content is None and
           dv[0].content_sha256 is None and dv[0].content_size_bytes is None and dv[0].path == "/notes/c.md"
           and dv[1].content == "/notes/c.md", "a deleted memory keeps its versions; the deleted one has no content")
    expect({v.operation for v in ver.list(sid, operation="created")} == {"created"}, "filter operation=created")
    expect(len(list(ver.list(sid, api_key_id=vs[0].created_by.api_key_id))) > 0 and
           len(list(ver.list(sid, api_key_id="apikey_other"))) == 0, "filter api_key_id")
    expect([v.id for v in ver.list(sid, memory_id=a.id, created_at_gte=vs[1].created_at)] == [vs[0].id, vs[1].id]
           and [v.id for v in ver.list(sid, memory_id=a.id, created_at_lte=vs[2].created_at)] == [vs[2].id],
           "filters created_at[gte] / created_at[lte]")
    n_all = len(list(ver.list(sid, limit=100)))
    expect(len(list(ver.list(sid, limit=3))) == n_all, f"versions paging (limit=3) reaches all {n_all}")
    old = raw_one(V, ver.with_raw_response.retrieve(vs[2].id, memory_store_id=sid), "retrieve version")
    expect(old.content == "alpha\n" and old.operation == "created", "retrieve version defaults to view=full")
    red = raw_one(V, ver.with_raw_response.redact(vs[2].id, memory_store_id=sid), "redact version")
    expect(red.redacted_at is not None and isinstance(red.redacted_by, BetaManagedAgentsAPIActor) and
           red.content is None and red.path is None and red.content_sha256 is None and
           red.content_size_bytes is None and red.created_by == old.created_by,
           "redact nulls content, path, sha and size; keeps created_by; sets redacted_at/by")
    expect(ver.retrieve(vs[2].id, memory_store_id=sid).redacted_at == red.redacted_at, "redaction is persistent")
    raises(anthropic.BadRequestError, lambda: ver.redact(vs[0].id, memory_store_id=sid),
           "redact the current version of a live memory")
    raises(anthropic.NotFoundError, lambda: ver.retrieve("memver_nope", memory_store_id=sid), "unknown version")

    print("errors, auth and faults")
    bad_key = anthropic.Anthropic(api_key="wrong", base_url=BASE, max_retries=0)
    raises(anthropic.AuthenticationError, lambda: bad_key.beta.memory_stores.list(), "a wrong API key",
           "authentication_error")
    # The SDK sends api_key (above) and auth_token as `Authorization: Bearer`.
    bearer = anthropic.Anthropic(auth_token=KEY, base_url=BASE, max_retries=0)
    expect(bearer.beta.memory_stores.retrieve(sid).id == sid, "Authorization: Bearer (auth_token) is accepted")
    x_api_key = anthropic.Anthropic(base_url=BASE, max_retries=0, default_headers={"X-Api-Key": KEY})
    expect(x_api_key.beta.memory_stores.retrieve(sid).id == sid, "X-Api-Key is accepted")
    raises(anthropic.BadRequestError, lambda: c.get(f"/v1/memory_stores/{sid}", cast_to=object),
           "a request without the anthropic-beta header")
    control("POST", "/_emulator/faults", {"memory_store_id": sid, "status": 429, "count": 1, "retry_after": "1"})
    _, resp = raises(anthropic.RateLimitError, lambda: mem.list(sid), "injected 429", "rate_limit_error")
    expect(resp.headers.get("retry-after") == "1", "the 429 carries retry-after: 1")
    control("POST", "/_emulator/faults", {"memory_store_id": sid, "status": 429, "count": 1, "retry_after": "1"})
    n0 = requests_for(sid)
    retrying = c.with_options(max_retries=2)
    expect(len(list(retrying.beta.memory_stores.memories.list(sid, limit=100))) > 0 and requests_for(sid) == n0 + 2,
           "with max_retries=2 the SDK waits retry-after, retries the 429 and succeeds (2 requests)")
    control("POST", "/_emulator/faults", {"memory_store_id": sid, "status": 529, "count": 1, "should_retry": False})
    n0 = requests_for(sid)
    raises(anthropic.OverloadedError, lambda: retrying.beta.memory_stores.retrieve(sid),
           "529 with x-should-retry: false")
    expect(requests_for(sid) == n0 + 1, "x-should-retry: false stops the SDK's retries")
    control("POST", "/_emulator/faults", {"memory_store_id": sid, "status": 500, "count": 1, "method": "POST"})
    expect(ms.retrieve(sid).id == sid, "a fault filtered to POST leaves a GET alone")
    raises(anthropic.InternalServerError, lambda: mem.create(sid, path="/f.md", content="f"), "injected 500 on POST")
    expect(not [i for i in mem.list(sid, limit=100) if i.path == "/f.md"], "no /f.md after the injected 500")

    print("race control")
    b = mem.retrieve(a.id, memory_store_id=sid)
    control("POST", "/_emulator/race", {"memory_store_id": sid, "count": 1})
    stale = {"type": "content_sha256", "content_sha256": b.content_sha256}
    raises(anthropic.ConflictError, lambda: mem.update(a.id, memory_store_id=sid, content="mine", precondition=stale),
           "update racing another writer", "memory_precondition_failed_error")
    after = mem.retrieve(a.id, memory_store_id=sid)
    expect(after.content == b.content + "race\n", "the racing writer appended 'race\\n'")
    racer = ver.list(sid, memory_id=a.id).data[0]
    expect(isinstance(racer.created_by, BetaManagedAgentsSessionActor),
           "the racing write is a version by a session_actor")
    expect(mem.update(a.id, memory_store_id=sid, content="mine", precondition={
        "type": "content_sha256", "content_sha256": after.content_sha256}).content_sha256 == sha("mine"),
        "race count used up: the next precondition update succeeds")
    return c


# ---- part 2: the SDK's sync engine against the emulator ----

class Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.records = []

    def emit(self, record):
        self.records.append(record.getMessage())


async def check_sync_engine(c):
    print("the SDK's sync engine (SessionMemoryStores)")
    log = Warnings()
    logging.getLogger("anthropic.lib.tools.agent_toolset").addHandler(log)
    logging.getLogger("anthropic.lib.tools.agent_toolset").setLevel(logging.INFO)
    mem = c.beta.memory_stores.memories
    sid = c.beta.memory_stores.create(name="sync check").id
    mem.create(sid, path="/seed/one.md", content="one\n")
    top = mem.create(sid, path="/top.md", content="top\n")
    aclient = anthropic.AsyncAnthropic(api_key=KEY, base_url=BASE)  # the SDK's default retries

    def by_path():
        return {i.path: i for i in mem.list(sid, limit=100)}

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "mnt" / "memory" / "sync-check"
        resource = BetaManagedAgentsMemoryStoreResource.model_validate(
            {"type": "memory_store", "memory_store_id": sid, "access": "read_write", "name": "sync check",
             "mount_path": str(root)})
        session = types.SimpleNamespace(id="sesn_local", resources=[resource])  # all download() reads
        engine = SessionMemoryStores(aclient, workdir=tmp, sync_interval=5.0)

        async def sync():
            engine._last_sync = 0.0  # due now, instead of sleeping out the 5 s cadence
            await engine.sync_if_due()

        await engine.download(session)
        expect((root / "seed/one.md").read_text() == "one\n" and (root / "top.md").read_text() == "top\n",
               "download: remote memories appear as files")
        expect((root / MARKER_PATH).read_text() == f"version 1\n{sid}", "download stamps the store marker")

        (root / "local").mkdir()
        (root / "local/new.md").write_text("written locally\n")
        (root / "top.md").write_text("top, edited locally\n")
        await sync()
        now = by_path()
        expect("/local/new.md" in now and mem.retrieve(now["/local/new.md"].id, memory_store_id=sid).content
               == "written locally\n", "sync: a new local file becomes a memory")
        expect(now["/top.md"].id == top.id and now["/top.md"].content_sha256 == sha("top, edited locally\n"),
               "sync: a local edit updates the memory (same id, precondition update)")
        expect(MARKER_PATH not in [p.lstrip("/") for p in now], "the marker file is never uploaded")

        mem.create(sid, path="/remote/r.md", content="written remotely\n")
        mem.update(now["/seed/one.md"].id, memory_store_id=sid, content="one, edited remotely\n")
        await sync()
        expect((root / "remote/r.md").read_text() == "written remotely\n", "sync: a new memory becomes a file")
        expect((root / "seed/one.md").read_text() == "one, edited remotely\n", "sync: a remote edit reaches the file")

        mem.delete(top.id, memory_store_id=sid)
        await sync()
        expect(not (root / "top.md").exists(), "sync: a memory deleted remotely is removed locally")

        # Both sides edit one file: the race control makes the engine's precondition update lose.
        (root / "seed/one.md").write_text("one, edited locally\n")
        control("POST", "/_emulator/race", {"memory_store_id": sid, "count": 1})
        await sync()
        expect(any("local edit loses" in m for m in log.records),
               "sync: the racing update gets 409 and the engine says so")
        await sync()
        expect((root / "seed/one.md").read_text() == "one, edited remotely\nrace\n",
               "sync: the next sync pulls the winning remote version over the file")

        # A transient 503 is retried by the SDK inside the engine's upload.
        control("POST", "/_emulator/faults", {"memory_store_id": sid, "status": 503, "count": 1, "method": "POST"})
        (root / "local/new.md").write_text("written locally, twice\n")

        def updates():
            by_route = control("GET", f"/_emulator/requests?memory_store_id={sid}")["by_route"]
            return by_route.get("POST /v1/memory_stores/{memory_store_id}/memories/{memory_id}", 0)

        n0 = updates()
        await engine.flush_writes()
        expect(by_path()["/local/new.md"].content_sha256 == sha("written locally, twice\n") and updates() == n0 + 2,
               "flush_writes: the upload succeeds through an injected 503 (the SDK's retry: 2 update requests)")

        (root / "remote/r.md").unlink()
        await sync()
        expect("/remote/r.md" in by_path(), "sync: a local delete waits for corroboration (not sent yet)")
        await engine.finish()
        expect("/remote/r.md" not in by_path(), "finish: the local delete reaches the server")
        failures = [m for m in log.records if "sync failed" in m or "flush failed" in m]
        expect(not failures, f"the engine logged no sync failures {failures}")
        await engine.dispose()
        expect(not root.exists(), "dispose removes the folder download created")
    await aclient.close()


def main():
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        os.environ.pop(var, None)  # only the emulator's URL and key, never a real credential
    if anthropic.__version__ != EXPECTED_SDK:
        fail(f"anthropic {anthropic.__version__} is installed; this check is written against {EXPECTED_SDK}")
    print(f"sdk_check: anthropic {anthropic.__version__} against {BASE}")
    try:
        c = check_endpoints()
        asyncio.run(check_sync_engine(c))
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        fail("an unexpected exception (above)")
    print(f"sdk_check: all {checks} checks passed")


if __name__ == "__main__":
    main()
