"""moto's S3 server with each request handled under one lock.

moto checks `If-None-Match` and `If-Match` and then writes, in two steps
that its threaded server can interleave between requests, so two
conditional writes can both succeed; Amazon S3 decides them atomically.
Serializing the requests makes moto's conditional writes atomic, as the
service's are, so the concurrency tests test the store and not the
emulator. Usage: python3 moto_server.py HOST PORT
"""
import sys
import threading

from moto.server import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple

LOCK = threading.Lock()
APP = DomainDispatcherApplication(create_backend_app)


def serialized(environ, start_response):
    with LOCK:
        # Read the whole answer under the lock: the write happens there.
        return list(APP(environ, start_response))


if __name__ == "__main__":
    run_simple(sys.argv[1], int(sys.argv[2]), serialized, threaded=True)
