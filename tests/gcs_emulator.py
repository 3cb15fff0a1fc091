"""A GCS JSON-API server on loopback for the tests: PyPI's ``gcp-storage-emulator``, run as
``python tests/gcs_emulator.py PORT [--preconditions]``.

The emulator ignores ``ifGenerationMatch``, as some S3-compatible stores ignore
``If-None-Match``: run as it is, it is the store whose missing conditional writes staging must
refuse. With ``--preconditions`` it honours ``ifGenerationMatch=0`` on object creation as GCS
documents it (https://cloud.google.com/storage/docs/request-preconditions): 412 when a live
object has the name, the check and the write under one lock. That is the only change.
"""
from __future__ import annotations

import sys
import threading
from http import HTTPStatus
import time


def honour_generation_match_zero() -> None:
    from gcp_storage_emulator import server
    from gcp_storage_emulator.exceptions import NotFound
    from gcp_storage_emulator.handlers import objects

    original = objects.insert
    lock = threading.Lock()

    def insert(request, response, storage, *args, **kwargs):
        condition = request.query.get("ifGenerationMatch")
        if not condition or condition[0] != "0":
            return original(request, response, storage, *args, **kwargs)
        with lock:
            name = request.query["name"][0] if "name" in request.query else request.data["meta"].get("name")
            try:
                storage.get_file_obj(request.params["bucket_name"], name)
            except NotFound:
                return original(request, response, storage, *args, **kwargs)
            response.status = HTTPStatus.PRECONDITION_FAILED
            response.json({"error": {"code": 412, "message": "At least one of the pre-conditions you specified "
                                     "did not hold.", "errors": [{"reason": "conditionNotMet"}]}})

    objects.insert = insert
    for _regex, handlers in server.HANDLERS:
        for method, handler in list(handlers.items()):
            if handler is original:
                handlers[method] = insert


def main() -> None:
    port = int(sys.argv[1])
    if "--preconditions" in sys.argv[2:]:
        honour_generation_match_zero()
    from gcp_storage_emulator.server import create_server

    server = create_server("127.0.0.1", port, in_memory=True)
    server.start()
    try:
        while True:
            time.sleep(1)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
