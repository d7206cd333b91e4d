"""A PostgreSQL cluster owned by the project, for the local Prefect server's database.

SQLite serialises every write: under a nightly evaluation (thousands of task runs) Prefect's server answered
503 "database is locked" and the run failed. Prefect recommends PostgreSQL for real workloads; this module keeps a
cluster of Debian's `postgresql` binaries under the data directory (no system service, no fixed port):

    <root>/cluster/   the data directory (initdb)        <root>/password   the `prefect` role's password (0600)
    <root>/port       the port it listens on            <root>/postgres.log

It listens on 127.0.0.1 only (no Unix socket), with password authentication. PostgreSQL refuses to run as root:
as root, the cluster belongs to the `postgres` system user that Debian's package creates.

    python -m ehrbench.stack.postgres start|stop|status|url <root>   (start and url print the connection URL)
"""

from __future__ import annotations

import argparse
import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from ehrbench.errors import EhrbenchError

ROLE = DATABASE = "prefect"
HOST = "127.0.0.1"
SERVICE_USER = "postgres"  # who runs the server when we are root
START_TIMEOUT_S = 120
# A development cluster: a crash may lose the last commits (never corrupts); Prefect's server opens a pool per
# process, and a worker, the flow runs and the UI all connect.
SERVER_OPTIONS = {"listen_addresses": HOST, "unix_socket_directories": "''", "synchronous_commit": "off",
                  "max_connections": "200", "shared_buffers": "128MB"}


class PostgresError(EhrbenchError):
    """The local PostgreSQL cluster is missing, unreachable or did not start."""


def binaries() -> Path:
    """The folder of initdb/pg_ctl/psql: on PATH, else Debian's /usr/lib/postgresql/<version>/bin (newest)."""
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).resolve().parent
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
                   key=lambda p: [int(n) for n in re.findall(r"\d+", p.parts[-3])])
    if not found:
        raise PostgresError("PostgreSQL is not installed (no pg_ctl on PATH or in /usr/lib/postgresql/*/bin); "
                            "'make postgres' installs Debian's postgresql package")
    return found[-1].parent


@dataclass(frozen=True)
class LocalPostgres:
    root: Path

    @property
    def cluster(self) -> Path:
        return self.root / "cluster"

    @property
    def log(self) -> Path:
        return self.root / "postgres.log"

    @property
    def _password_file(self) -> Path:
        return self.root / "password"

    @property
    def _port_file(self) -> Path:
        return self.root / "port"

    def url(self) -> str:
        """The SQLAlchemy URL Prefect's server takes (PREFECT_SERVER_DATABASE_CONNECTION_URL)."""
        return f"postgresql+asyncpg://{ROLE}:{quote(self._password(), safe='')}@{HOST}:{self.port()}/{DATABASE}"

    def port(self) -> int:
        try:
            return int(self._port_file.read_text())
        except (OSError, ValueError):
            raise PostgresError(f"no PostgreSQL cluster at {self.root} (expected {self._port_file}); "
                                "start it with 'make server'") from None

    def running(self) -> bool:
        if not (self.cluster / "PG_VERSION").is_file():
            return False
        return self._pg(["pg_ctl", "status", "-D", str(self.cluster)], check=False).returncode == 0

    def start(self) -> str:
        """Create the cluster if needed, start it (on its recorded port while that is free) and the `prefect`
        database; returns the connection URL."""
        if self.running():
            return self.url()
        self._prepare_root()
        if not (self.cluster / "PG_VERSION").is_file():
            self._initdb()
        port = self._free_port()
        self._port_file.write_text(f"{port}\n")
        options = " ".join(f"-c {key}={value}" for key, value in {**SERVER_OPTIONS, "port": port}.items())
        started = self._pg(["pg_ctl", "start", "-D", str(self.cluster), "-l", str(self.log), "-w",
                            "-t", str(START_TIMEOUT_S), "-o", options], check=False)
        if started.returncode != 0:
            raise PostgresError(f"PostgreSQL did not start on {HOST}:{port}: {_last_line(started)}; "
                                f"see {self.log}")
        self._ensure_database()
        return self.url()

    def stop(self) -> bool:
        """Stop the cluster (fast shutdown: open connections are closed); False when it was not running."""
        if not self.running():
            return False
        stopped = self._pg(["pg_ctl", "stop", "-D", str(self.cluster), "-m", "fast", "-w",
                            "-t", str(START_TIMEOUT_S)], check=False)
        if stopped.returncode != 0:
            raise PostgresError(f"PostgreSQL at {self.cluster} did not stop: {_last_line(stopped)}")
        return True

    # -- internals --------------------------------------------------------------------------------------------

    def _password(self) -> str:
        try:
            return self._password_file.read_text().strip()
        except OSError:
            raise PostgresError(f"no PostgreSQL cluster at {self.root} (expected {self._password_file})") from None

    def _prepare_root(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o700)
        owner = _service_account()
        if owner is None:
            return
        for path in (self.root, *self.root.rglob("*")):
            os.lchown(path, owner.pw_uid, owner.pw_gid)
        reach = subprocess.run(["test", "-w", str(self.root)], user=owner.pw_uid, group=owner.pw_gid,
                               extra_groups=[], check=False)
        if reach.returncode != 0:
            raise PostgresError(
                f"PostgreSQL runs as the system user '{SERVICE_USER}' (it refuses root) and cannot reach {self.root}: "
                "a parent folder is closed to other users; open it (chmod o+x) or choose another DATA_DIR")

    def _initdb(self) -> None:
        self._password_file.write_text(secrets.token_urlsafe(24) + "\n")
        self._password_file.chmod(0o600)
        owner = _service_account()
        if owner is not None:
            os.chown(self._password_file, owner.pw_uid, owner.pw_gid)
        created = self._pg(["initdb", "-D", str(self.cluster), "-U", ROLE, f"--pwfile={self._password_file}",
                            "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C"], check=False)
        if created.returncode != 0:
            raise PostgresError(f"initdb failed in {self.cluster}: {_last_line(created)}")

    def _free_port(self) -> int:
        """The recorded port while nobody else listens there (a stable URL across restarts), else a new one."""
        try:
            recorded = int(self._port_file.read_text())
        except (OSError, ValueError):
            recorded = 0
        with socket.socket() as probe:
            try:
                probe.bind((HOST, recorded))
            except OSError:
                probe.bind((HOST, 0))
            return probe.getsockname()[1]

    def _ensure_database(self) -> None:
        psql = ["psql", "-h", HOST, "-p", str(self.port()), "-U", ROLE, "-d", "postgres", "-v", "ON_ERROR_STOP=1",
                "-tAc"]
        exists = self._pg([*psql, f"select 1 from pg_database where datname = '{DATABASE}'"], password=True)
        if exists.stdout.strip() != "1":
            self._pg([*psql, f"create database {DATABASE}"], password=True)

    def _pg(self, command: list[str], *, check: bool = True, password: bool = False) -> subprocess.CompletedProcess:
        """Run a PostgreSQL program as the cluster's owner."""
        env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
        env.update(LC_ALL="C", PGCONNECT_TIMEOUT="10")
        if password:
            env["PGPASSWORD"] = self._password()
        owner = _service_account()
        as_owner = {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []} if owner else {}
        if owner:
            env["HOME"] = owner.pw_dir
        result = subprocess.run([str(binaries() / command[0]), *command[1:]], env=env, capture_output=True,
                                text=True, check=False, cwd="/", timeout=START_TIMEOUT_S + 30, **as_owner)
        if check and result.returncode != 0:
            raise PostgresError(f"{command[0]} failed: {_last_line(result)}")
        return result


def _service_account() -> pwd.struct_passwd | None:
    """The account to run PostgreSQL as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVICE_USER)
    except KeyError:
        raise PostgresError(f"PostgreSQL refuses to run as root and there is no '{SERVICE_USER}' user; "
                            "install Debian's postgresql package ('make postgres'), which creates it") from None


def _last_line(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in (result.stderr + result.stdout).splitlines() if line.strip()]
    return lines[-1].strip() if lines else f"exit code {result.returncode}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ehrbench.stack.postgres", description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["start", "stop", "status", "url"])
    parser.add_argument("root", type=Path, help="the cluster's folder, e.g. data/postgres")
    args = parser.parse_args(argv)
    cluster = LocalPostgres(args.root.resolve())
    try:
        if args.action == "start":
            url = cluster.start()
            print(f"PostgreSQL on {HOST}:{cluster.port()} (data: {cluster.cluster}; log: {cluster.log})",
                  file=sys.stderr)
            print(url)
        elif args.action == "stop":
            print("stopped PostgreSQL" if cluster.stop() else "PostgreSQL: not running", file=sys.stderr)
        elif args.action == "status":
            running = cluster.running()
            print(f"PostgreSQL: {'running on ' + HOST + ':' + str(cluster.port()) if running else 'not running'}")
            return 0 if running else 3
        else:
            print(cluster.url())
    except PostgresError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
