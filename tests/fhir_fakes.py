"""Tiny FHIR resource databases for tests: the table the FHIR export writes, filled with hand-written resources; and
a real uvicorn server to put an app over one on a free port."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import uvicorn


def write_resources_db(path: Path, resources: list[dict]) -> Path:
    """A resources.duckdb as the FHIR export writes it (same table and columns)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(path)) as con:
        con.execute("create table resources (id varchar, resource_type varchar, patient_id varchar, "
                    "source_table varchar, source_key json, resource json)")
        con.executemany("insert into resources values (?, ?, ?, 'hand', '{}', ?)", [
            (r["id"], r["resourceType"],
             r["id"] if r["resourceType"] == "Patient" else r.get("subject", {}).get("reference", "/")[8:] or None,
             json.dumps(r)) for r in resources])
    return path


@contextmanager
def serving(app, **config) -> Iterator[str]:
    """The base URL of a real uvicorn server running `app` in a thread (uvicorn.Config options in `config`)."""
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", **config))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))  # the server takes the bound socket: no race for the port
    port = sock.getsockname()[1]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def slow_down_searches(index) -> None:
    """Make every search of a SearchIndex run for minutes, as a costly one over the full MIMIC-IV would: its `idx`
    table becomes a view repeating each row a billion times (reads, which use the resources file, stay fast)."""
    with index.cursor() as cur:
        cur.execute("alter table idx rename to idx_fast")
        cur.execute("create view idx as select f.* from idx_fast f, range(1000000000)")

