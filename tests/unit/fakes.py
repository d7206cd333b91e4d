"""Small fake PhysioNet releases and a real local HTTP file server for the unit tests.

A fake release has the official layout of a `Release` (paths, headers from `TableSpec.columns`), a few
rows of plausible values per column type and a correct `SHA256SUMS.txt`. Files are gzip-compressed
with a fixed mtime so that rewriting the same rows gives the same bytes (and the same SHA-256).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import re
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from ehrbench.sources.releases import CHECKSUM_FILE, Release, TableSpec

# One plausible CSV cell per documented DuckDB type; `{i}` is the 1-based row number.
SAMPLE_VALUES = {
    "INTEGER": "{i}",
    "SMALLINT": "{i}",
    "BIGINT": "{i}",
    "DOUBLE": "{i}.5",
    "VARCHAR": "x{i}",
    "TIMESTAMP": "2180-01-0{i} 10:00:00",
    "DATE": "2180-01-0{i}",
    "BOOLEAN": "t",
}


def rows_for(spec: TableSpec, n: int) -> list[list[str]]:
    """`n` rows whose cells all fit the documented column types."""
    return [[SAMPLE_VALUES[kind].format(i=i) for _, kind in spec.columns] for i in range(1, n + 1)]


def gzip_csv(header: list[str], rows: list[list[str]]) -> bytes:
    lines = [",".join(header)] + [",".join(row) for row in rows]
    return gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0)


def write_table(root: Path, spec: TableSpec, rows: list[list[str]] | int = 2,
                header: list[str] | None = None) -> Path:
    """Write one table file under `root` at the release path; `rows` is a row count or the rows."""
    path = root / spec.path
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(rows, int):
        rows = rows_for(spec, rows)
    path.write_bytes(gzip_csv(header or [name for name, _ in spec.columns], rows))
    return path


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_sums(root: Path, overrides: dict[str, str] | None = None,
               extra: dict[str, str] | None = None) -> Path:
    """SHA256SUMS.txt for every file under `root` (as `sha256sum` writes it), with some lines replaced."""
    overrides = overrides or {}
    lines = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name != CHECKSUM_FILE):
        relative = path.relative_to(root).as_posix()
        lines.append(f"{overrides.get(relative, sha256_bytes(path.read_bytes()))}  {relative}")
    lines += [f"{digest}  {relative}" for relative, digest in (extra or {}).items()]
    sums = root / CHECKSUM_FILE
    sums.write_text("\n".join(lines) + "\n")
    return sums


def expected_rows(spec: TableSpec) -> int:
    """Row counts differ per table (1..3) so a mixed-up table shows in the counts."""
    return 1 + sum(map(ord, spec.name)) % 3


def write_release(root: Path, release: Release, *, optional: bool = False) -> dict[str, int]:
    """Every required table (and every optional one if asked) plus SHA256SUMS.txt; returns name -> rows."""
    counts = {}
    for spec in release.tables:
        if spec.required or optional:
            counts[spec.name] = expected_rows(spec)
            write_table(root, spec, counts[spec.name])
    write_sums(root)
    return counts


# --- a real HTTP file server -------------------------------------------------------------------


@dataclass
class SeenRequest:
    path: str
    range: str | None
    authorization: str | None


@dataclass
class FileServer:
    """Serves `root` over HTTP/1.1 on 127.0.0.1 with single-range `bytes=N-` support (206 / 416).

    Knobs the tests turn: `credentials` (user, password) → 401 without matching basic auth;
    `honor_range=False` → always 200 with the whole file; `cut_once[path] = n` → the next response for
    `path` announces the full length but sends only `n` bytes and closes the connection.
    """

    root: Path
    credentials: tuple[str, str] | None = None
    honor_range: bool = True
    cut_once: dict[str, int] = field(default_factory=dict)
    requests: list[SeenRequest] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/"

    def gets(self, relative: str) -> list[SeenRequest]:
        with self._lock:
            return [r for r in self.requests if r.path == relative]

    def start(self) -> FileServer:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                         daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler_for(state: FileServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

        def log_message(self, format, *args):  # keep test output quiet
            pass

        def _status(self, code: int, headers: dict[str, str] | None = None) -> None:
            self.send_response(code)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self):
            relative = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path).lstrip("/")
            with state._lock:
                state.requests.append(SeenRequest(relative, self.headers.get("Range"),
                                                  self.headers.get("Authorization")))
            if state.credentials:
                token = base64.b64encode(":".join(state.credentials).encode()).decode()
                if self.headers.get("Authorization") != f"Basic {token}":
                    return self._status(401, {"WWW-Authenticate": 'Basic realm="physionet"'})
            file = (state.root / relative).resolve()
            if not file.is_relative_to(state.root.resolve()) or not file.is_file():
                return self._status(404)
            data = file.read_bytes()
            code, body, headers = 200, data, {}
            requested = self.headers.get("Range")
            if requested and state.honor_range:
                match = re.fullmatch(r"bytes=(\d+)-", requested)
                start = int(match.group(1)) if match else 0
                if start >= len(data):
                    return self._status(416, {"Content-Range": f"bytes */{len(data)}"})
                code, body = 206, data[start:]
                headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
            with state._lock:
                cut = state.cut_once.pop(relative, None)
            self.send_response(code)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if cut is not None:
                self.wfile.write(body[:cut])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(body)

    return Handler
