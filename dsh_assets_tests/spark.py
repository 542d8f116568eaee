"""The Spark engine in tests: one local[2] session per test session, and a Spark Connect server on loopback."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

SPARK_MASTER = "local[2]"
CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
CONNECT_START_SECONDS = 180


def unavailable() -> str | None:
    """Why the Spark tests cannot run here (None: they can). `make test` installs both."""
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install -e '.[spark]'; `make test` does)"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "java is missing (Debian: apt-get install openjdk-17-jre-headless; `make test` does)"
    return None


def require_spark() -> None:
    reason = unavailable()
    if reason:
        pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def connect_server(log_dir: Path):
    """A Spark Connect server from the installed pyspark, on a free loopback port: yields sc://127.0.0.1:port,
    then stops the server by its PID. Its Python workers run this interpreter with this checkout on the path."""
    import pyspark

    spark_home = Path(pyspark.__file__).parent
    port = _free_port()
    repository = str(Path(__file__).resolve().parents[1])
    environment = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_HOME": str(spark_home),
                   "PYTHONPATH": os.pathsep.join(filter(None, [repository, os.environ.get("PYTHONPATH")]))}
    log = open(log_dir / "connect-server.log", "wb")
    server = subprocess.Popen(
        [str(spark_home / "bin" / "spark-submit"), "--class", CONNECT_SERVER_CLASS, "--master", SPARK_MASTER,
         "--conf", f"spark.connect.grpc.binding.port={port}", "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
         "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.session.timeZone=UTC", "spark-internal"],
        stdout=log, stderr=subprocess.STDOUT, env=environment)
    try:
        deadline = time.monotonic() + CONNECT_START_SECONDS
        while not _listening(port):
            if server.poll() is not None:
                raise RuntimeError(f"the Spark Connect server exited with {server.returncode}; see {log.name}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Spark Connect server did not listen on {port} within "
                                   f"{CONNECT_START_SECONDS} s; see {log.name}")
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}", server.pid
    finally:
        os.kill(server.pid, 15)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.kill(server.pid, 9)
            server.wait()
        log.close()


def on_both_engines(spark, compute):
    """``compute(engine)`` on the embedded engine and on the spark one, which must start its session for it
    (so the Spark figures were computed on Spark, not embedded)."""
    from dsh_assets.core.engines import EMBEDDED, SPARK, engine_for

    sessions = []
    embedded = compute(engine_for(EMBEDDED))
    on_spark = compute(engine_for(SPARK, lambda: sessions.append(spark) or spark))
    assert sessions, "the spark engine computed without its session"
    return embedded, on_spark
