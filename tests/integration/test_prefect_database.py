"""The temporary Prefect server's database is seeded from a migrated template (ehrbench.stack.prefect_database): a
real `prefect server database upgrade` makes the template, and a real temporary server runs a flow on the copy."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ehrbench.stack.prefect_database import SQLITE_URL, seed_database, sqlite_file

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FLOW = """
from prefect import flow
@flow(name="seeded")
def seeded():
    return 1
seeded()
"""


def rows(database, sql):
    with sqlite3.connect(database) as con:
        return con.execute(sql).fetchall()


def test_a_new_data_directory_runs_its_flows_on_a_copy_of_the_template(tmp_path):
    # the session's cache folder (tests/conftest.py): the template is made once, as for the CLI tests' servers
    cache, home = Path(os.environ["EHRBENCH_CACHE_DIR"]), tmp_path / "data" / "prefect"
    database = home / "prefect.db"
    assert seed_database(database, cache)
    assert not seed_database(database, cache)  # a database in place is never replaced
    head = rows(database, "select version_num from alembic_version")
    assert head and rows(database, "select count(*) from flow_run") == [(0,)]

    env = {key: value for key, value in os.environ.items() if not key.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(home), PREFECT_PROFILES_PATH=str(home / "profiles.toml"), DO_NOT_TRACK="1",
               PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="180")
    subprocess.run([sys.executable, "-c", FLOW], env=env, cwd=tmp_path, check=True, capture_output=True, timeout=600)
    assert rows(database, "select name from flow where name = 'seeded'") == [("seeded",)]  # the server used the copy
    assert rows(database, "select version_num from alembic_version") == head  # and found nothing to migrate


def test_only_a_sqlite_database_is_seeded():
    assert sqlite_file(f"{SQLITE_URL}/data/prefect/prefect.db").as_posix() == "/data/prefect/prefect.db"
    assert sqlite_file("postgresql+asyncpg://prefect@localhost:5433/prefect") is None
