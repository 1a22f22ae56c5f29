"""moto's S3 server with each request handled under one lock.

moto checks `If-None-Match` and `If-Match` and then writes, in two steps
that its threaded server can interleave between requests, so two
conditional writes can both succeed; Amazon S3 decides them atomically.
Serializing the requests makes moto's conditional writes atomic, as the
service's are, so the concurrency tests test the store and not the
emulator.

Amazon S3 also honours `If-None-Match: *` on CopyObject (412 when the
destination exists); moto's CopyObject ignores it and overwrites. Under
the same lock, such a copy is answered 412 when a HEAD of the
destination finds an object, as S3 does. Usage:
python3 moto_server.py HOST PORT
"""
import sys
import threading

from moto.server import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple

LOCK = threading.Lock()
APP = DomainDispatcherApplication(create_backend_app)


def exists(environ):
    """Whether the object a request names exists: moto's backend asked
    directly (a path-style request: /BUCKET/KEY), else a HEAD through
    moto."""
    try:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        bucket, key = environ["PATH_INFO"].lstrip("/").split("/", 1)
        if not key.isascii():  # PATH_INFO is latin-1: let moto decode it
            raise ValueError(key)
        backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
        return backend.get_object(bucket, key) is not None
    except Exception:  # noqa: BLE001 - any doubt: ask moto itself
        pass
    head = dict(environ)
    head["REQUEST_METHOD"] = "HEAD"
    head["CONTENT_LENGTH"] = "0"
    head["QUERY_STRING"] = ""
    for k in list(head):
        if k.startswith("HTTP_X_AMZ_COPY") or k in ("HTTP_IF_NONE_MATCH", "HTTP_IF_MATCH"):
            del head[k]
    status = []
    list(APP(head, lambda s, h, e=None: status.append(s)))
    return bool(status) and status[0].startswith("200")


PRECONDITION = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code>'
    b"<Message>At least one of the pre-conditions you specified did not hold</Message>"
    b"<Condition>If-None-Match</Condition></Error>"
)


def serialized(environ, start_response):
    with LOCK:
        copy = environ.get("REQUEST_METHOD") == "PUT" and "HTTP_X_AMZ_COPY_SOURCE" in environ
        if copy and environ.get("HTTP_IF_NONE_MATCH") == "*" and exists(environ):
            start_response(
                "412 Precondition Failed",
                [("Content-Type", "application/xml"), ("Content-Length", str(len(PRECONDITION)))],
            )
            return [PRECONDITION]
        # Read the whole answer under the lock: the write happens there.
        return list(APP(environ, start_response))


if __name__ == "__main__":
    run_simple(sys.argv[1], int(sys.argv[2]), serialized, threaded=True)
