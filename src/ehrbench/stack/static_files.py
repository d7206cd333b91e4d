"""The pages that Prefect artifacts link to, over HTTP: the Prefect UI does not open `file://` links.

    /report/…                     the evaluation dashboard (reports/site/, or EHRBENCH_REPORT_DIR)
    /builds/<build_id>/gx/…       a published build's Great Expectations Data Docs (its reports/gx/)

Only those: a build's databases, hidden gold and the raw files are never served. `make server` starts it on
127.0.0.1:FILES_PORT and gives the worker EHRBENCH_FILES_URL, so the flows link `http://…` instead of files.

    python -m ehrbench.stack.static_files --data-dir data --report-dir reports/site --port 4201
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.routing import Route

from ehrbench.environment import environment
from ehrbench.layout import BuildLayout

_BUILD_ID = re.compile(r"[0-9A-Za-z_.-]+")


def files_url() -> str | None:
    """The static server's base URL when one serves this data directory (`make server`), else None."""
    url = (environment().files_url or "").strip()
    return url.rstrip("/") or None


def report_link(index: Path, report_dir: Path) -> str:
    """Where a person opens the dashboard: over HTTP when the static server serves `report_dir`, else the file."""
    base = files_url()
    if base and index.resolve().is_relative_to(report_dir.resolve()):
        return f"{base}/report/{index.resolve().relative_to(report_dir.resolve()).as_posix()}"
    return index.resolve().as_uri()


def data_docs_link(benchmarks: Path, build_id: str) -> str:
    """A published build's Data Docs: over HTTP when served, else the file in the published (not staging) folder."""
    base = files_url()
    if base:
        return f"{base}/builds/{build_id}/gx/index.html"
    return BuildLayout(benchmarks / build_id).gx_index.resolve().as_uri()


def create_app(benchmarks: Path, report_dir: Path) -> Starlette:
    benchmarks, report_dir = benchmarks.resolve(), report_dir.resolve()

    async def report(request: Request) -> Response:
        return _file(report_dir, request.path_params["path"])

    async def data_docs(request: Request) -> Response:
        build_id = request.path_params["build_id"]
        if not _BUILD_ID.fullmatch(build_id) or build_id.endswith(".tmp") or build_id.startswith("."):
            raise HTTPException(404, "no such build")
        return _file(BuildLayout(benchmarks / build_id).gx_docs, request.path_params["path"])

    async def home(request: Request) -> Response:
        return RedirectResponse("/report/index.html")

    return Starlette(routes=[Route("/", home), Route("/report/{path:path}", report),
                             Route("/builds/{build_id}/gx/{path:path}", data_docs)])


def _file(root: Path, relative: str) -> FileResponse:
    """`relative` inside `root` (a folder gives its index.html); nothing outside it, however the path is spelled."""
    target = (root / relative).resolve()
    if target.is_dir():
        target = target / "index.html"
    if not target.is_relative_to(root) or not target.is_file():
        raise HTTPException(404, f"not found: {relative}")
    return FileResponse(target)


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m ehrbench.stack.static_files", description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--report-dir", type=Path, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    app = create_app(args.data_dir / "benchmarks", args.report_dir)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
