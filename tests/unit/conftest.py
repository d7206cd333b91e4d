"""Fixtures for the unit tests: fake releases in tmp dirs, a warehouse file, a local HTTP server."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from ehrbench.sources.releases import Release, release_for

from .fakes import FileServer, write_release


@pytest.fixture
def mimic() -> Release:
    return release_for("mimic_iv", "demo")


@pytest.fixture
def fake_mimic(tmp_path: Path, mimic: Release) -> tuple[Path, dict[str, int]]:
    """A MIMIC-IV-layout release with every required table (optional ones omitted)."""
    root = tmp_path / "mimic-iv"
    return root, write_release(root, mimic)


@pytest.fixture
def warehouse(tmp_path: Path):
    """A connection to a real DuckDB file."""
    con = duckdb.connect(str(tmp_path / "warehouse.duckdb"))
    yield con
    con.close()


@pytest.fixture
def file_server(tmp_path: Path):
    root = tmp_path / "served"
    root.mkdir()
    server = FileServer(root).start()
    yield server
    server.stop()
