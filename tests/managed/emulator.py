#!/usr/bin/env python3
"""An in-memory emulator of Anthropic's memory stores API, for tests.

It serves the endpoints the official Python SDK (anthropic==2.14.0,
`client.beta.memory_stores`) calls, with the objects its types define:
memory stores, memories and memory versions. Standard library only.

    python3 tests/managed/emulator.py --host 127.0.0.1 --port 55520 --api-key test-key

Where the SDK's documentation is silent the emulator is strict, so a client
that works here also works against a more lenient server. Those choices are
marked "GUESS" below. Test controls (not part of the real API, no auth):

    POST /_emulator/faults        {"memory_store_id", "status", "count",
                                   "retry_after"?, "should_retry"?, "method"?,
                                   "skip"? (let n pass first), "after"? (apply, then fail)}
    POST /_emulator/race          {"memory_store_id", "count"}
    POST /_emulator/caps          {"memory_store_id", "memories"?, "versions"?}: the store's caps
                                  (by default the service's: 2,000 memories, 250,000 versions)
    POST /_emulator/fill          {"memory_store_id", "count", "per_directory"?}: creates `count`
                                  memories /dNN/fKKK.md ("line one\nline two\n", 50 a directory
                                  by default) as the API would, in one request
    POST /_emulator/latency       {"ms"}: every API request waits this long before it is served
                                  (a round trip over the internet), 0 to stop
    POST /_emulator/patch         {"memory_store_id", "count", "method"?, "fields", "match"?}: the
                                  next `count` answers have `fields` merged in (into each listed
                                  item too; with `match`, only into items whose fields equal
                                  match's): a faulty service's answers
    POST /_emulator/unpatch       {"memory_store_id"}: drops the store's pending patches
    POST /_emulator/normalise     {"memory_store_id", "crlf": bool}: the store keeps content
                                  with CRLF line ends as LF (a service that normalises text)
    GET  /_emulator/requests?memory_store_id=…   POST /_emulator/reset_counts
    GET  /_emulator/health
"""

import argparse
import base64
import hashlib
import json
import secrets
import string
import sys
import threading
import time
import unicodedata
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

BETAS = ("agent-memory-2026-07-22", "managed-agents-2026-04-01")
MAX_CONTENT_BYTES = 102_400  # "The maximum size is 100 kB (102,400 bytes)."
MAX_PATH_BYTES = 1024
MAX_PATH_SEGMENTS = 20
MAX_MEMORIES = 2_000  # "a store holds at most 2,000 memories"
MAX_VERSIONS = 250_000  # "and 250,000 versions"
MAX_BODY_BYTES = 8 * 1024 * 1024  # a whole request; larger ones get 413
RACE_ACTOR = {"type": "session_actor", "session_id": "sesn_emulatorrace"}

# The error `type` each status carries (Anthropic's error shape).
# GUESS: 503 as api_error (the SDK's ErrorType has no dedicated one).
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 409: "conflict_error", 413: "request_too_large",
               429: "rate_limit_error", 500: "api_error", 503: "api_error", 529: "overloaded_error"}


class ApiError(Exception):
    """An error response: status, Anthropic error type, message, extra error fields and headers."""

    def __init__(self, status, message, etype=None, extra=None, headers=None):
        super().__init__(message)
        self.status, self.message = status, message
        self.etype = etype or ERROR_TYPES.get(status, "api_error")
        self.extra, self.headers = extra or {}, headers or {}


def bad(message):
    return ApiError(400, message)


def new_id(prefix):
    alphabet = string.ascii_letters + string.digits
    return prefix + "01" + "".join(secrets.choice(alphabet) for _ in range(22))


def sha256_hex(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def rfc3339(dt):
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value, name):
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00").replace(" ", "+"))
    except ValueError:
        raise bad(f"{name}: not an RFC 3339 timestamp: {value!r}") from None
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


# ---- input validation: every check runs before any change ----

def check_path(path, name="path"):
    """The path rules of memory_create_params.py / memory_update_params.py."""
    if not isinstance(path, str):
        raise bad(f"{name}: must be a string")
    if not path.startswith("/"):
        raise bad(f"{name}: must start with '/'")
    try:
        size = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        raise bad(f"{name}: is not valid UTF-8") from None
    if size > MAX_PATH_BYTES:
        raise bad(f"{name}: is {size} bytes; at most {MAX_PATH_BYTES} bytes are allowed")
    segments = path[1:].split("/")
    if not 1 <= len(segments) <= MAX_PATH_SEGMENTS:
        raise bad(f"{name}: must have 1 to {MAX_PATH_SEGMENTS} segments, has {len(segments)}")
    for seg in segments:
        if seg in ("", ".", ".."):
            raise bad(f"{name}: a segment can't be empty, '.' or '..'")
    for ch in path:
        if unicodedata.category(ch) in ("Cc", "Cf") or ch in "\u2028\u2029":
            raise bad(f"{name}: contains a control, format or line/paragraph separator character (U+{ord(ch):04X})")
    if not unicodedata.is_normalized("NFC", path):
        raise bad(f"{name}: must be in Unicode Normalization Form C")
    return path


def check_content(content):
    if not isinstance(content, str):
        raise bad("content: must be a string")
    try:
        size = len(content.encode("utf-8"))
    except UnicodeEncodeError:
        raise bad("content: is not valid UTF-8 (lone surrogate)") from None
    if size > MAX_CONTENT_BYTES:
        raise bad(f"content: is {size} bytes; a memory holds at most {MAX_CONTENT_BYTES} bytes")
    return content


def check_sha(value, name):
    if not (isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)):
        raise bad(f"{name}: must be 64 lowercase hexadecimal characters")
    return value


def check_keys(body, allowed, required=()):
    for key in body:
        if key not in allowed:  # GUESS: unknown body fields are refused, as the Messages API does
            raise bad(f"{key}: Extra inputs are not permitted")
    for key in required:
        if key not in body:
            raise bad(f"{key}: Field required")


def check_store_fields(body, updating):
    """name, description, metadata as memory_store_create_params / _update_params define them.
    On update, null means "leave as is", and a null metadata value removes that key."""
    name, desc, meta = body.get("name"), body.get("description"), body.get("metadata")
    if name is not None or not updating:
        if not isinstance(name, str) or not 1 <= len(name) <= 255 or any(unicodedata.category(c) == "Cc" for c in name):
            raise bad("name: must be 1 to 255 characters, without control characters")
    if desc is not None and (not isinstance(desc, str) or len(desc) > 1024):
        raise bad("description: must be a string of at most 1,024 characters")
    if "description" in body and desc is None and not updating:
        raise bad("description: must be a string")
    if meta is not None or ("metadata" in body and not updating):
        if not isinstance(meta, dict):
            raise bad("metadata: must be an object")
        for k, v in meta.items():
            if not 1 <= len(k) <= 64:
                raise bad("metadata: keys are 1 to 64 characters long")
            if not (v is None and updating) and (not isinstance(v, str) or len(v) > 512):
                raise bad(f"metadata[{k}]: values are strings of at most 512 characters")
    return name, desc, meta


def one(query, name, default=None):
    values = query.get(name)
    return values[0] if values else default


def query_int(query, name, default, lo, hi):
    raw = one(query, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise bad(f"{name}: must be an integer") from None
    if not lo <= value <= hi:
        raise bad(f"{name}: must be between {lo} and {hi}")
    return value


def query_view(query, default):
    view = one(query, "view", default)
    if view not in ("basic", "full"):
        raise bad("view: must be 'basic' or 'full'")
    return view


def page_limit(query, view):
    limit = query_int(query, "limit", 20, 1, 100)
    # GUESS: the docs say view=full "caps" a page at 20 items; the emulator
    # refuses a larger limit (400) rather than shrinking it silently.
    if view == "full" and limit > 20:
        raise bad("limit: with view=full, limit must be at most 20")
    return limit


def created_between(items, query):
    """The created_at[gte] / created_at[lte] filters (the SDK's created_at_gte / _lte)."""
    for name in ("created_at[gte]", "created_at[lte]"):
        if one(query, name) is not None:
            t = parse_time(one(query, name), name)
            items = [i for i in items if (i["created_at"] >= t if name.endswith("[gte]") else i["created_at"] <= t)]
    return items


def paginate(items, key, limit, page, descending=False):
    """One page of `items` (already in order) after the opaque `page` cursor."""
    if page:
        try:
            after = json.loads(base64.urlsafe_b64decode(page.removeprefix("page_").encode()))["k"]
        except Exception:
            raise bad("page: invalid page cursor") from None
        items = [i for i in items if (key(i) < after if descending else key(i) > after)]
    out = items[:limit]
    nxt = None
    if len(items) > limit:
        nxt = "page_" + base64.urlsafe_b64encode(json.dumps({"k": key(out[-1])}).encode()).decode()
    return {"data": out, "next_page": nxt}


# ---- the state: one lock around everything ----

class State:
    def __init__(self, api_key, max_memories):
        self.lock = threading.Lock()
        self.api_key = api_key
        self.api_key_id = "apikey_01" + hashlib.sha256(api_key.encode()).hexdigest()[:22]
        self.max_memories = max_memories
        self.caps = {}  # store id -> {"memories": n, "versions": n}, the caps control
        self.latency = 0.0  # seconds every API request waits, the latency control
        self.stores = {}  # id -> store dict (with its memories and versions)
        self.faults = []  # pending injected failures
        self.patches = []  # pending answer patches
        self.races = {}  # store id -> how many precondition writes still get a racing writer
        self.normalising = set()  # store ids whose content is kept with LF for CRLF
        self.counts = {}  # store id -> {"count": n, "by_route": {route: n}}
        self.last_time = datetime.now(timezone.utc)
        self.seq = 0

    def now(self):
        """A strictly increasing timestamp, so time filters and orders are exact."""
        t = datetime.now(timezone.utc)
        self.last_time = t if t > self.last_time else self.last_time + timedelta(microseconds=1)
        return self.last_time

    def next_seq(self):
        self.seq += 1
        return self.seq

    def actor(self):
        return {"type": "api_actor", "api_key_id": self.api_key_id}

    def store(self, sid):
        s = self.stores.get(sid)
        if s is None:
            raise ApiError(404, f"memory store {sid} not found")
        return s

    def normalised(self, sid, content):
        """The normalise control: content as a normalising service keeps it."""
        return content.replace("\r\n", "\n") if sid in self.normalising else content

    def writable_store(self, sid):
        s = self.store(sid)
        if s["archived_at"] is not None:
            raise bad(f"memory store {sid} is archived; its memories can't be created or updated")
        return s

    def cap(self, sid, what):
        default = {"memories": self.max_memories, "versions": MAX_VERSIONS}[what]
        return self.caps.get(sid, {}).get(what, default)

    def check_version_room(self, s):
        """A write records a version: refused, before any change, in a store at its version cap.
        GUESS: the docs give the cap but not the answer; a bad request (400), as for the memory cap.
        Deletes are still allowed (they free memories; like an archived store's)."""
        cap = self.cap(s["id"], "versions")
        if len(s["versions"]) >= cap:
            raise bad(f"memory store {s['id']} already holds {len(s['versions'])} memory versions, "
                      f"the most a store can hold ({cap}); redact or delete versions first")

    def memory(self, store, mid):
        m = store["memories"].get(mid)
        if m is None:
            raise ApiError(404, f"memory {mid} not found in memory store {store['id']}")
        return m

    # ---- rendering the SDK's types ----

    @staticmethod
    def store_json(s):
        return {"id": s["id"], "type": "memory_store", "name": s["name"], "description": s["description"],
                "metadata": dict(s["metadata"]), "created_at": rfc3339(s["created_at"]),
                "updated_at": rfc3339(s["updated_at"]),
                "archived_at": rfc3339(s["archived_at"]) if s["archived_at"] else None}

    @staticmethod
    def memory_json(m, full):
        return {"id": m["id"], "type": "memory", "memory_store_id": m["store_id"], "path": m["path"],
                "content": m["content"] if full else None, "content_sha256": m["sha"],
                "content_size_bytes": m["size"], "memory_version_id": m["version_id"],
                "created_at": rfc3339(m["created_at"]), "updated_at": rfc3339(m["updated_at"])}

    @staticmethod
    def version_json(v, full):
        return {"id": v["id"], "type": "memory_version", "memory_id": v["memory_id"],
                "memory_store_id": v["store_id"], "operation": v["operation"], "path": v["path"],
                "content": v["content"] if full else None, "content_sha256": v["sha"],
                "content_size_bytes": v["size"], "created_at": rfc3339(v["created_at"]),
                "created_by": v["created_by"],
                "redacted_at": rfc3339(v["redacted_at"]) if v["redacted_at"] else None,
                "redacted_by": v["redacted_by"]}

    # ---- the one place memories change: every change records a version ----

    def record(self, store, m, operation, actor):
        deleted = operation == "deleted"
        v = {"id": new_id("memver_"), "memory_id": m["id"], "store_id": store["id"], "operation": operation,
             "path": m["path"], "content": None if deleted else m["content"],
             "sha": None if deleted else m["sha"], "size": None if deleted else m["size"],
             "created_at": self.now(), "created_by": actor, "redacted_at": None, "redacted_by": None,
             "seq": self.next_seq()}
        store["versions"][v["id"]] = v
        m["version_id"], m["updated_at"] = v["id"], v["created_at"]

    def write(self, store, m, content, path, actor):
        if path != m["path"]:
            del store["by_path"][m["path"]]
            store["by_path"][path] = m["id"]
        m.update(path=path, content=content, sha=sha256_hex(content), size=len(content.encode("utf-8")))
        self.record(store, m, "modified", actor)

    def maybe_race(self, store, mid):
        """The race control: another writer changes the memory just before this request."""
        m = store["memories"].get(mid)
        if self.races.get(store["id"], 0) > 0 and m is not None and store["archived_at"] is None:
            self.races[store["id"]] -= 1
            self.write(store, m, m["content"] + "race\n", m["path"], RACE_ACTOR)

    # ---- memory stores ----

    def create_store(self, q, body):
        check_keys(body, ("name", "description", "metadata"), required=("name",))
        name, desc, meta = check_store_fields(body, updating=False)
        if len(meta or {}) > 16:
            raise bad("metadata: at most 16 key-value pairs")
        t = self.now()
        s = {"id": new_id("memstore_"), "name": name, "description": desc or "", "metadata": dict(meta or {}),
             "created_at": t, "updated_at": t, "archived_at": None, "seq": self.next_seq(),
             "memories": {}, "by_path": {}, "versions": {}}
        self.stores[s["id"]] = s
        return 200, self.store_json(s)

    def list_stores(self, q, body):
        include = one(q, "include_archived", "false")
        if include not in ("true", "false"):
            raise bad("include_archived: must be true or false")
        items = sorted(self.stores.values(), key=lambda s: -s["seq"])  # newest first
        if include == "false":
            items = [s for s in items if s["archived_at"] is None]
        items = created_between(items, q)
        page = paginate(items, lambda s: s["seq"], query_int(q, "limit", 20, 1, 100), one(q, "page"), True)
        page["data"] = [self.store_json(s) for s in page["data"]]
        return 200, page

    def get_store(self, q, body, sid):
        return 200, self.store_json(self.store(sid))

    def update_store(self, q, body, sid):
        check_keys(body, ("name", "description", "metadata"))
        name, desc, changes = check_store_fields(body, updating=True)
        s = self.store(sid)
        if s["archived_at"] is not None:
            raise bad(f"memory store {sid} is archived and can't be updated")
        meta = dict(s["metadata"])
        for k, v in (changes or {}).items():
            if v is None:
                meta.pop(k, None)
            else:
                meta[k] = v
        if len(meta) > 16:
            raise bad("metadata: at most 16 key-value pairs after the change")
        new = (s["name"] if name is None else name, s["description"] if desc is None else desc, meta)
        if new != (s["name"], s["description"], s["metadata"]):
            s["name"], s["description"], s["metadata"] = new
            s["updated_at"] = self.now()
        return 200, self.store_json(s)

    def delete_store(self, q, body, sid):
        self.store(sid)
        del self.stores[sid]
        return 200, {"id": sid, "type": "memory_store_deleted"}

    def archive_store(self, q, body, sid):
        s = self.store(sid)
        if s["archived_at"] is None:  # "Archiving a store that is already archived returns it unchanged."
            s["archived_at"] = s["updated_at"] = self.now()
        return 200, self.store_json(s)

    # ---- memories ----

    def create_memory(self, q, body, sid):
        view = query_view(q, "basic")
        check_keys(body, ("path", "content"), required=("path", "content"))
        path, content = check_path(body["path"]), check_content(body["content"])
        s = self.writable_store(sid)
        content = self.normalised(sid, content)
        if path in s["by_path"]:
            raise path_conflict(s["by_path"][path], path)
        cap = self.cap(sid, "memories")
        if len(s["memories"]) >= cap:
            # GUESS: the docs give the 2,000-memory cap but no status; a full
            # store is refused as a bad request (400), which the SDK's sync
            # engine treats as permanent for that file, not as a retryable 409.
            raise bad(f"memory store {sid} already holds {len(s['memories'])} memories, "
                      f"the most a store can hold ({cap}); delete memories first")
        self.check_version_room(s)
        t = self.now()
        m = {"id": new_id("mem_"), "store_id": sid, "path": path, "content": content, "sha": sha256_hex(content),
             "size": len(content.encode("utf-8")), "created_at": t, "updated_at": t, "version_id": None}
        s["memories"][m["id"]], s["by_path"][path] = m, m["id"]
        self.record(s, m, "created", self.actor())
        m["created_at"] = m["updated_at"]  # the created version's time
        return 200, self.memory_json(m, view == "full")

    def get_memory(self, q, body, sid, mid):
        view = query_view(q, "full")
        return 200, self.memory_json(self.memory(self.store(sid), mid), view == "full")

    def update_memory(self, q, body, sid, mid):
        view = query_view(q, "basic")
        check_keys(body, ("content", "path", "precondition"))
        # GUESS: a null content or path (the SDK types allow it) means "leave it as it is", like omitting it.
        content = None if body.get("content") is None else check_content(body["content"])
        path = None if body.get("path") is None else check_path(body["path"])
        pre = body.get("precondition")
        if pre is not None:
            shape_ok = isinstance(pre, dict) and pre.get("type") == "content_sha256"
            if not shape_ok or set(pre) - {"type", "content_sha256"}:
                raise bad("precondition: must be {\"type\": \"content_sha256\", \"content_sha256\": …}")
            check_sha(pre.get("content_sha256"), "precondition.content_sha256")
        s = self.writable_store(sid)
        if content is not None:
            content = self.normalised(sid, content)
        if pre is not None:
            self.maybe_race(s, mid)
        m = self.memory(s, mid)
        new_content = m["content"] if content is None else content
        new_path = m["path"] if path is None else path
        unchanged = new_content == m["content"] and new_path == m["path"]
        if pre is not None and pre["content_sha256"] != m["sha"] and not unchanged:
            # Anthropic's API reference: if the precondition fails but the stored
            # state already equals the requested content and path, 200 instead of 409.
            raise precondition_failed(m)
        if new_path != m["path"] and new_path in s["by_path"]:
            raise path_conflict(s["by_path"][new_path], new_path)
        if not unchanged:  # "If you update a memory and nothing changes, the memory doesn't get a new version."
            self.check_version_room(s)
            self.write(s, m, new_content, new_path, self.actor())
        return 200, self.memory_json(m, view == "full")

    def delete_memory(self, q, body, sid, mid):
        expected = one(q, "expected_content_sha256")
        if expected is not None:
            check_sha(expected, "expected_content_sha256")
        s = self.store(sid)  # deleting is allowed in an archived store
        if expected is not None:
            self.maybe_race(s, mid)
        m = self.memory(s, mid)
        if expected is not None and expected != m["sha"]:
            raise precondition_failed(m)
        del s["memories"][mid], s["by_path"][m["path"]]
        self.record(s, m, "deleted", self.actor())
        return 200, {"id": mid, "type": "memory_deleted"}

    def list_memories(self, q, body, sid):
        view = query_view(q, "basic")
        limit = page_limit(q, view)
        depth = query_int(q, "depth", 0, 0, 10_000)
        prefix = one(q, "path_prefix", "/")
        if not prefix.startswith("/") or not prefix.endswith("/"):
            raise bad("path_prefix: must start and end with '/'")
        s = self.store(sid)
        items, seen = [], set()
        for path in sorted(p for p in s["by_path"] if p.startswith(prefix)):  # whole segments: prefix ends in '/'
            rest = path[len(prefix):].split("/")
            if depth and len(rest) > depth:  # deeper than asked: roll up into a prefix marker
                roll = prefix + "/".join(rest[:depth]) + "/"
                if roll not in seen:
                    seen.add(roll)
                    items.append({"type": "memory_prefix", "path": roll})
            else:
                items.append(s["memories"][s["by_path"][path]])
        items.sort(key=lambda i: i["path"])
        page = paginate(items, lambda i: i["path"], limit, one(q, "page"))
        page["data"] = [i if i.get("type") == "memory_prefix" else self.memory_json(i, view == "full")
                        for i in page["data"]]
        return 200, page

    # ---- memory versions ----

    def list_versions(self, q, body, sid):
        view = query_view(q, "basic")
        limit = page_limit(q, view)
        s = self.store(sid)
        items = sorted(s["versions"].values(), key=lambda v: -v["seq"])  # newest first
        op = one(q, "operation")
        if op is not None and op not in ("created", "modified", "deleted"):
            raise bad("operation: must be 'created', 'modified' or 'deleted'")
        filters = {"memory_id": lambda v: v["memory_id"], "operation": lambda v: v["operation"],
                   "api_key_id": lambda v: (v["created_by"] or {}).get("api_key_id"),
                   "session_id": lambda v: (v["created_by"] or {}).get("session_id"),
                   "service_account_id": lambda v: (v["created_by"] or {}).get("service_account_id")}
        for name, get in filters.items():
            want = one(q, name)
            if want is not None:
                items = [v for v in items if get(v) == want]
        items = created_between(items, q)
        page = paginate(items, lambda v: v["seq"], limit, one(q, "page"), True)
        page["data"] = [self.version_json(v, view == "full") for v in page["data"]]
        return 200, page

    def version(self, s, vid):
        v = s["versions"].get(vid)
        if v is None:
            raise ApiError(404, f"memory version {vid} not found in memory store {s['id']}")
        return v

    def get_version(self, q, body, sid, vid):
        view = query_view(q, "full")
        return 200, self.version_json(self.version(self.store(sid), vid), view == "full")

    def redact_version(self, q, body, sid, vid):
        check_keys(body, ())
        s = self.store(sid)
        v = self.version(s, vid)
        m = s["memories"].get(v["memory_id"])
        if v["redacted_at"] is None:  # GUESS: redacting twice returns the version unchanged
            if m is not None and m["version_id"] == vid:
                # GUESS: the current version of a live memory can't be redacted
                # (it would change the memory); update or delete it first.
                raise bad(f"memory version {vid} is the current version of memory {m['id']}; "
                          "update or delete the memory before redacting it")
            v.update(content=None, path=None, sha=None, size=None, redacted_at=self.now(), redacted_by=self.actor())
        return 200, self.version_json(v, True)


def path_conflict(mid, path):
    return ApiError(409, f"a memory already exists at path {path!r}", "memory_path_conflict_error",
                    {"conflicting_memory_id": mid, "conflicting_path": path},
                    {"x-should-retry": "false"})  # GUESS: a deterministic conflict is marked not retryable


def precondition_failed(m):
    return ApiError(409, f"precondition failed: memory {m['id']} has content_sha256 {m['sha']}",
                    "memory_precondition_failed_error", headers={"x-should-retry": "false"})


# (method, path pattern) -> handler name; "*" matches one id segment.
ROUTES = [
    ("POST", ("v1", "memory_stores"), "create_store"),
    ("GET", ("v1", "memory_stores"), "list_stores"),
    ("GET", ("v1", "memory_stores", "*"), "get_store"),
    ("POST", ("v1", "memory_stores", "*"), "update_store"),
    ("DELETE", ("v1", "memory_stores", "*"), "delete_store"),
    ("POST", ("v1", "memory_stores", "*", "archive"), "archive_store"),
    ("POST", ("v1", "memory_stores", "*", "memories"), "create_memory"),
    ("GET", ("v1", "memory_stores", "*", "memories"), "list_memories"),
    ("GET", ("v1", "memory_stores", "*", "memories", "*"), "get_memory"),
    ("POST", ("v1", "memory_stores", "*", "memories", "*"), "update_memory"),
    ("DELETE", ("v1", "memory_stores", "*", "memories", "*"), "delete_memory"),
    ("GET", ("v1", "memory_stores", "*", "memory_versions"), "list_versions"),
    ("GET", ("v1", "memory_stores", "*", "memory_versions", "*"), "get_version"),
    ("POST", ("v1", "memory_stores", "*", "memory_versions", "*", "redact"), "redact_version"),
]


def route(method, segments):
    """(handler name, path ids, route template such as "GET /v1/memory_stores/{memory_store_id}") or None."""
    for m, pattern, name in ROUTES:
        if m == method and len(pattern) == len(segments) and all(p in ("*", s) for p, s in zip(pattern, segments)):
            ids = [s for p, s in zip(pattern, segments) if p == "*"]
            names = ["{memory_store_id}", "{memory_id}" if "memories" in pattern else "{memory_version_id}"]
            template = "/".join(names.pop(0) if p == "*" else p for p in pattern)
            return name, ids, f"{method} /{template}"
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; every response carries Content-Length
    # Headers and body go out in two writes; without TCP_NODELAY, Nagle plus
    # delayed ACKs add ~40 ms to every keep-alive request.
    disable_nagle_algorithm = True
    state: State = None
    verbose = False

    def log_message(self, fmt, *args):
        if self.verbose:
            sys.stderr.write("emulator: " + fmt % args + "\n")

    def read_body(self):
        """The whole request body (Content-Length or chunked), so the connection stays in step."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline().strip():  # trailers
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
                if len(data) > MAX_BODY_BYTES:
                    raise ApiError(413, "request body too large")
        length = int(self.headers.get("Content-Length") or 0)
        if length < 0 or length > MAX_BODY_BYTES:
            raise ApiError(413, "request body too large")
        return self.rfile.read(length) if length else b""

    def send_json(self, status, obj, headers=None):
        data = json.dumps(obj).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def send_error_json(self, err, request_id):
        body = {"type": "error", "error": {"type": err.etype, "message": err.message, **err.extra},
                "request_id": request_id}
        self.send_json(err.status, body, {"request-id": request_id, **err.headers})

    def handle_any(self, method):
        request_id = "req_" + secrets.token_hex(12)
        try:
            try:
                raw = self.read_body()
            except (ValueError, ApiError):
                self.close_connection = True  # the body was not read: the stream is out of step
                raise ApiError(413, "request body unreadable or too large")
            url = urlsplit(self.path)
            query = parse_qs(url.query, keep_blank_values=True)
            segments = [unquote(s) for s in url.path.strip("/").split("/")]
            if segments[0] == "_emulator":
                return self.send_json(*self.control(method, segments[1:], query, raw))
            self.serve_api(method, segments, query, raw, request_id)
        except ApiError as e:
            self.send_error_json(e, request_id)
        except Exception as e:  # never let one bad request take the server down
            self.send_error_json(ApiError(500, f"emulator error: {type(e).__name__}: {e}"), request_id)

    def serve_api(self, method, segments, query, raw, request_id):
        st = self.state
        found = route(method, segments)
        sid = segments[2] if len(segments) > 2 and segments[:2] == ["v1", "memory_stores"] else None
        with st.lock:  # request counts: every request naming a store, whatever its outcome
            if sid is not None:
                c = st.counts.setdefault(sid, {"count": 0, "by_route": {}})
                c["count"] += 1
                key = found[2] if found else f"{method} (unknown route)"
                c["by_route"][key] = c["by_route"].get(key, 0) + 1
        key = self.headers.get("x-api-key")
        auth = self.headers.get("Authorization", "")
        if key != st.api_key and auth != f"Bearer {st.api_key}":
            raise ApiError(401, "invalid x-api-key" if key or not auth else "invalid bearer token")
        if st.latency > 0:  # outside the lock: other requests go on meanwhile
            time.sleep(st.latency)
        betas = [b.strip() for b in self.headers.get("anthropic-beta", "").split(",")]
        if not any(b in BETAS for b in betas):
            raise bad(f"this endpoint is in beta: send 'anthropic-beta: {BETAS[0]}' (or {BETAS[1]})")
        if all(b in betas for b in BETAS):
            # The memory stores pages: send one of the two betas, never both (400).
            raise bad(f"send one of the betas {BETAS[0]} and {BETAS[1]}, not both")
        if found is None:
            raise ApiError(404, f"no route for {method} {'/' + '/'.join(segments)}")
        name, args, _ = found
        body = {}
        if method == "POST" and raw.strip():
            try:
                body = json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                raise bad("request body is not valid JSON") from None
            if not isinstance(body, dict):
                raise bad("request body must be a JSON object")
        with st.lock:
            lost = self.inject_fault(sid, method) if sid is not None else None
            status, obj = getattr(st, name)(query, body, *args)
            self.patch_answer(sid, method, obj)
        if lost is not None:  # applied, but the answer is lost on the way
            raise lost
        self.send_json(status, obj, {"request-id": request_id})

    def patch_answer(self, sid, method, obj):
        """The patch control: merge a pending patch's fields into an answer."""
        for p in self.state.patches:
            if p["memory_store_id"] == sid and p["count"] > 0 and p["method"] in (None, method):
                p["count"] -= 1
                match = p.get("match") or {}
                for item in [obj] + list(obj.get("data") or []) if isinstance(obj, dict) else []:
                    if isinstance(item, dict) and all(item.get(k) == v for k, v in match.items()):
                        item.update(p["fields"])
                return

    def inject_fault(self, sid, method):
        """The faults control: the next matching request fails, and nothing
        changes; after `skip` matching requests have passed; with `after`,
        the request is applied and the fault returned, to answer in place
        of its result (a write whose answer was lost)."""
        for f in self.state.faults:
            if f["memory_store_id"] == sid and f["count"] > 0 and f["method"] in (None, method):
                if f["skip"] > 0:
                    f["skip"] -= 1
                    return None
                f["count"] -= 1
                headers = {}
                if f["retry_after"] is not None:
                    headers["retry-after"] = f["retry_after"]
                if f["should_retry"] is not None:
                    headers["x-should-retry"] = "true" if f["should_retry"] else "false"
                fault = ApiError(f["status"], f"injected fault ({f['status']})", headers=headers)
                if f["after"]:
                    return fault
                raise fault
        return None

    def control(self, method, segments, query, raw):
        st = self.state
        what = "/".join(segments)
        try:
            body = json.loads(raw) if raw.strip() else {}
        except (ValueError, UnicodeDecodeError):
            raise bad("control body is not valid JSON") from None
        if not isinstance(body, dict):
            raise bad("control body must be a JSON object")
        with st.lock:
            if (method, what) == ("GET", "health"):
                return 200, {"status": "ok"}
            if (method, what) == ("POST", "faults"):
                sid, status, count = body.get("memory_store_id"), body.get("status"), body.get("count", 1)
                if not isinstance(sid, str) or status not in (401, 409, 429, 500, 503, 529):
                    raise bad("faults: need memory_store_id and status in 401, 409, 429, 500, 503, 529")
                if not isinstance(count, int) or count < 0 or body.get("method") not in (None, "POST", "GET", "DELETE"):
                    raise bad("faults: count is a non-negative integer, method POST, GET or DELETE")
                ra, sr = body.get("retry_after"), body.get("should_retry")
                if (ra is not None and not isinstance(ra, (str, int))) or (sr is not None and not isinstance(sr, bool)):
                    raise bad("faults: retry_after is a header value, should_retry a boolean")
                skip, after = body.get("skip", 0), body.get("after", False)
                if not isinstance(skip, int) or skip < 0 or not isinstance(after, bool):
                    raise bad("faults: skip is a non-negative integer, after a boolean")
                st.faults.append({"memory_store_id": sid, "status": status, "count": count,
                                  "retry_after": None if ra is None else str(ra), "should_retry": sr,
                                  "method": body.get("method"), "skip": skip, "after": after})
                return 200, {"ok": True}
            if (method, what) == ("POST", "patch"):
                sid, count, fields = body.get("memory_store_id"), body.get("count", 1), body.get("fields")
                if not isinstance(sid, str) or not isinstance(count, int) or not isinstance(fields, dict):
                    raise bad("patch: need memory_store_id, count and fields (an object)")
                match = body.get("match")
                if match is not None and not isinstance(match, dict):
                    raise bad("patch: match is an object")
                st.patches.append({"memory_store_id": sid, "count": count, "fields": fields,
                                   "method": body.get("method"), "match": match})
                return 200, {"ok": True}
            if (method, what) == ("POST", "unpatch"):
                sid = body.get("memory_store_id")
                if not isinstance(sid, str):
                    raise bad("unpatch: need memory_store_id")
                st.patches = [p for p in st.patches if p["memory_store_id"] != sid]
                return 200, {"ok": True}
            if (method, what) == ("POST", "normalise"):
                sid, crlf = body.get("memory_store_id"), body.get("crlf")
                if not isinstance(sid, str) or not isinstance(crlf, bool):
                    raise bad("normalise: need memory_store_id and crlf (a boolean)")
                if crlf:
                    st.normalising.add(sid)
                else:
                    st.normalising.discard(sid)
                return 200, {"ok": True}
            if (method, what) == ("POST", "race"):
                sid, count = body.get("memory_store_id"), body.get("count", 1)
                if not isinstance(sid, str) or not isinstance(count, int) or count < 0:
                    raise bad("race: need memory_store_id and a non-negative integer count")
                st.races[sid] = count
                return 200, {"ok": True}
            if (method, what) == ("POST", "caps"):
                sid = body.get("memory_store_id")
                caps = {k: body[k] for k in ("memories", "versions") if k in body}
                if not isinstance(sid, str) or not all(isinstance(v, int) and v >= 0 for v in caps.values()):
                    raise bad("caps: need memory_store_id, and memories and versions as non-negative integers")
                st.caps.setdefault(sid, {}).update(caps)
                return 200, {"ok": True}
            if (method, what) == ("POST", "fill"):
                sid, count, per = body.get("memory_store_id"), body.get("count"), body.get("per_directory", 50)
                if not isinstance(sid, str) or not isinstance(count, int) or not isinstance(per, int) \
                        or not 0 <= count <= 100_000 or not 1 <= per <= 1000:
                    raise bad("fill: need memory_store_id, count (0 to 100000) and per_directory (1 to 1000)")
                for k in range(count):
                    path = f"/d{k // per:02}/f{k % per:03}.md"
                    st.create_memory({}, {"path": path, "content": "line one\nline two\n"}, sid)
                return 200, {"ok": True}
            if (method, what) == ("POST", "latency"):
                ms = body.get("ms")
                if not isinstance(ms, (int, float)) or not 0 <= ms <= 10_000:
                    raise bad("latency: need ms, from 0 to 10000")
                st.latency = ms / 1000
                return 200, {"ok": True}
            if (method, what) == ("GET", "requests"):
                sid = one(query, "memory_store_id")
                if sid is not None:
                    c = st.counts.get(sid, {"count": 0, "by_route": {}})
                    return 200, {"count": c["count"], "by_route": dict(c["by_route"])}
                total = {"count": 0, "by_route": {}}
                for c in st.counts.values():
                    total["count"] += c["count"]
                    for k, n in c["by_route"].items():
                        total["by_route"][k] = total["by_route"].get(k, 0) + n
                return 200, total
            if (method, what) == ("POST", "reset_counts"):
                if body.get("memory_store_id") is not None:
                    st.counts.pop(body["memory_store_id"], None)
                else:
                    st.counts.clear()
                return 200, {"ok": True}
        raise ApiError(404, f"no emulator control {method} /_emulator/{what}")


for _method in ("GET", "POST", "DELETE", "PUT", "PATCH"):  # all methods go through handle_any
    setattr(Handler, "do_" + _method, lambda self: self.handle_any(self.command))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=55520)
    ap.add_argument("--api-key", required=True)
    ap.add_argument("--max-memories", type=int, default=MAX_MEMORIES, help="memories per store (the service's cap)")
    ap.add_argument("--verbose", action="store_true", help="log every request to stderr")
    a = ap.parse_args()
    Handler.state = State(a.api_key, a.max_memories)
    Handler.verbose = a.verbose
    server = ThreadingHTTPServer((a.host, a.port), Handler)
    server.daemon_threads = True
    print(f"memory stores emulator on http://{a.host}:{a.port}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
