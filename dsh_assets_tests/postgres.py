"""A throwaway PostgreSQL server for the tests: Debian's binaries, loopback only, stopped by its PID.

One server per test session (the `postgres` fixture in conftest.py); each test that needs storage
gets its own database. `initdb` refuses to run as root, so as root the server runs as the
`postgres` user the Debian package creates, in a temporary folder that user owns.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT = 60.0
STOP_GRACE = 15.0
SUPERUSER = "dsh"


class Unavailable(Exception):
    """No server can be started here; the message says why (the tests that need one are skipped)."""


def binaries() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        raise Unavailable("PostgreSQL server binaries are absent (/usr/lib/postgresql/*/bin/initdb): "
                          "install Debian's postgresql package (`make test` does)")
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class PostgresServer:
    bindir: Path
    base: Path
    port: int = 0
    process: subprocess.Popen | None = None
    _names: itertools.count = field(default_factory=itertools.count)
    _account: dict = field(default_factory=dict)

    @classmethod
    def start(cls) -> "PostgresServer":
        bindir = binaries()
        account = {}
        if os.geteuid() == 0:
            try:
                user = pwd.getpwnam("postgres")
            except KeyError:
                raise Unavailable("running as root and there is no `postgres` user to run the server as") from None
            account = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
        # Under /tmp, not pytest's root-only tmp folder: the server's user must reach its files.
        base = Path(tempfile.mkdtemp(prefix="dsh-postgres-"))
        server = cls(bindir=bindir, base=base, _account=account)
        try:
            server._initdb_and_run()
        except BaseException:
            server.stop()
            raise
        return server

    def _initdb_and_run(self) -> None:
        data, sockets, log = self.base / "data", self.base / "sockets", self.base / "server.log"
        sockets.mkdir()
        if self._account:
            for path in (self.base, sockets):
                os.chown(path, self._account["user"], self._account["group"])
        init = subprocess.run(
            [self.bindir / "initdb", "-D", data, "-A", "trust", "-U", SUPERUSER, "-E", "UTF8", "--no-sync"],
            capture_output=True, text=True, stdin=subprocess.DEVNULL, **self._account)
        if init.returncode != 0:
            raise Unavailable(f"initdb failed: {init.stderr.strip()[-500:]}")
        self.port = _free_port()
        with open(log, "wb") as handle:
            self.process = subprocess.Popen(
                [self.bindir / "postgres", "-D", data, "-h", "127.0.0.1", "-p", str(self.port), "-k", sockets,
                 "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
                 "-c", "max_connections=200"],
                stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                **self._account)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.process.poll() is not None:
                raise Unavailable(f"postgres exited with {self.process.returncode}: {log.read_text()[-500:]}")
            try:
                self.execute("SELECT 1")
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise Unavailable(f"postgres did not accept connections in {START_TIMEOUT:.0f} s") from None
                time.sleep(0.2)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def execute(self, statement: str, database: str = "postgres") -> list[tuple]:
        import psycopg2

        connection = psycopg2.connect(self.url(database), connect_timeout=5)
        try:
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute(statement)
                return cursor.fetchall() if cursor.description else []
        finally:
            connection.close()

    def new_database(self, prefix: str = "dsh") -> str:
        """A fresh, empty database; its URL."""
        name = f"{prefix}_{os.getpid()}_{next(self._names)}"
        self.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        """SIGTERM to the server's PID (a smart shutdown), SIGKILL after a grace period; then remove its files."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=STOP_GRACE)
        shutil.rmtree(self.base, ignore_errors=True)
