"""The temporary Prefect server's database, migrated once per Prefect version instead of once per data directory.

Without a configured API, a CLI command's flows run against a temporary server whose SQLite database lives under the
data directory (PREFECT_HOME). In a new data directory that server first applies Prefect's ~200 schema migrations:
about 10 s of a cold demo build, on its critical path. Here an empty, migrated database is made once per installed
Prefect version (`prefect server database upgrade`, in a subprocess on a folder of its own) and kept in the user's
cache folder; a data directory without a database gets a copy. The copy holds no runs: only the schema and its
alembic version, which the server checks and finds current.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

from ehrbench.layout import write_once

SQLITE_URL = "sqlite+aiosqlite:///"  # Prefect's own scheme for its SQLite database


def sqlite_file(connection_url: str) -> Path | None:
    """The database file of a Prefect connection URL, None when it is not SQLite (a server on PostgreSQL)."""
    return Path(connection_url.removeprefix(SQLITE_URL)) if connection_url.startswith(SQLITE_URL) else None


def seed_database(database: Path, cache_dir: Path) -> bool:
    """Give a data directory's temporary server a migrated database when it has none; True when it did.

    Any failure to make or copy the template leaves the server to migrate a new database itself, as before."""
    if database.exists():
        return False
    try:
        template = migrated_template(cache_dir / "prefect" / version("prefect"))
        # never a half-copied database in a server's place; a second command seeding at once finds it there
        write_once(database, lambda partial: shutil.copyfile(template, partial))
    except (OSError, subprocess.SubprocessError):
        return False
    return True


def migrated_template(folder: Path) -> Path:
    """The empty migrated database of this Prefect version, made on first use."""
    template = folder / "prefect.db"
    if template.is_file():
        return template
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".making-") as making:
        env = {key: value for key, value in os.environ.items() if not key.startswith("PREFECT_")}
        env.update(PREFECT_HOME=making, PREFECT_SERVER_DATABASE_CONNECTION_URL=f"{SQLITE_URL}{making}/prefect.db",
                   PREFECT_PROFILES_PATH=f"{making}/profiles.toml", DO_NOT_TRACK="1",
                   PREFECT_SERVER_ANALYTICS_ENABLED="false")
        subprocess.run([sys.executable, "-m", "prefect", "server", "database", "upgrade", "-y"], env=env,
                       cwd=making, check=True, capture_output=True, timeout=600)
        os.replace(Path(making) / "prefect.db", template)  # two builds racing both make one; either is complete
    return template
