"""A throwaway PostgreSQL cluster for tests: initdb in a temp dir, started on a free loopback port.

PostgreSQL refuses to run as root. When the tests run as root the cluster is created and run
as the `postgres` system user (Debian's package creates it) through `runuser`; otherwise it
runs as the current user. Either way clients connect over TCP as the superuser `postgres`
with trust authentication, so the connecting process's identity does not matter.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.broker import free_port

SUPERUSER = "postgres"
SYSTEM_USER = "postgres"


def find_bin_dir() -> Path:
    """The newest installed PostgreSQL's bin dir (Debian layout), or the one holding pg_ctl on PATH."""
    override = os.environ.get("ODRADEK_PG_BIN")
    if override:
        return Path(override)

    def major(path: str) -> int:
        try:
            return int(Path(path).parent.name)
        except ValueError:
            return -1

    candidates = sorted((p for p in glob.glob("/usr/lib/postgresql/*/bin") if Path(p, "initdb").exists()),
                        key=major)
    if candidates:
        return Path(candidates[-1])
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).parent
    raise FileNotFoundError("no PostgreSQL found: install the postgresql Debian package "
                            "(or set ODRADEK_PG_BIN to its bin dir)")


class PostgresServer:
    """One PostgreSQL cluster owned by the test session."""

    def __init__(self, bin_dir: Path | None = None, port: int | None = None) -> None:
        self.bin_dir = bin_dir or find_bin_dir()
        self.port = port or free_port()
        # Not under pytest's tmp dir: that one is private to root (0700) and the `postgres`
        # user could not reach a data dir below it.
        self.root = Path(tempfile.mkdtemp(prefix="odradek-pg-"))
        self.data_dir = self.root / "data"
        self.socket_dir = self.root / "sock"
        self.log_path = self.root / "postgres.log"
        self._as_other = os.geteuid() == 0
        self.started = False

    @property
    def conninfo(self) -> str:
        return self.dsn("postgres")

    def dsn(self, dbname: str) -> str:
        return f"host=127.0.0.1 port={self.port} user={SUPERUSER} dbname={dbname}"

    def _run(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bin_dir / tool), *args]
        if self._as_other:
            cmd = ["runuser", "-u", SYSTEM_USER, "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False,
                              cwd=self.root, env={**os.environ, "LC_ALL": "C"})
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}\n{self.log()}")
        return done

    def start(self) -> PostgresServer:
        try:
            return self._start()
        except BaseException:
            with contextlib.suppress(Exception):
                self.stop()
            raise

    def _start(self) -> PostgresServer:
        self.socket_dir.mkdir()
        if self._as_other:
            user = pwd.getpwnam(SYSTEM_USER)
            for path in (self.root, self.socket_dir):
                os.chown(path, user.pw_uid, user.pw_gid)
        self._run("initdb", "-D", str(self.data_dir), "-U", SUPERUSER, "--auth=trust",
                  "--encoding=UTF8", "--no-sync")
        # Durability is not under test here: fsync off keeps commits cheap on a shared machine.
        options = " ".join([
            "-c listen_addresses=127.0.0.1", f"-p {self.port}", f"-k {self.socket_dir}",
            "-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off",
            "-c shared_buffers=32MB", "-c max_connections=40",
            # Logical decoding for the CDC connector (issue 19): a little more WAL per write,
            # nothing to wait for at start; slots and senders stay at their small defaults.
            "-c wal_level=logical", "-c max_replication_slots=10", "-c max_wal_senders=10",
        ])
        # Marked before pg_ctl returns: if it times out, stop() still shuts the server down.
        self.started = True
        self._run("pg_ctl", "-D", str(self.data_dir), "-l", str(self.log_path), "-o", options,
                  "-w", "-t", "60", "start")
        return self

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-20000:]
        except OSError:
            return ""

    def stop(self) -> None:
        try:
            if self.started:
                self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "-t", "60", "stop")
                self.started = False
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def running_postgres() -> Iterator[PostgresServer]:
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.stop()
