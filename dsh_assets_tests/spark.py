"""The Spark engine in tests: one local[2] session per test session, whose JVM also serves Spark Connect on loopback."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

SPARK_MASTER = "local[2]"
CONNECT_PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
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
def local_session():
    """The test session's local[2] Spark session, made by the engine's own ``spark_session``. Its JVM also serves
    Spark Connect on a free loopback port (``connect_url``), so the end-to-end run through Spark Connect starts no
    second JVM. When the block ends the session stops and the JVM is stopped by its PID."""
    from dsh_assets.core.spark.session import spark_session

    port = _free_port()
    submit = (f"--conf spark.plugins={CONNECT_PLUGIN} --conf spark.connect.grpc.binding.address=127.0.0.1 "
              f"--conf spark.connect.grpc.binding.port={port} pyspark-shell")
    with pytest.MonkeyPatch.context() as patch:  # the JVM's launch reads it; later subprocesses must not
        patch.setenv("PYSPARK_SUBMIT_ARGS", submit)
        session = spark_session(SPARK_MASTER)
    jvm = session.sparkContext._gateway.proc
    try:
        _wait_listening(port, jvm)
        yield session
    finally:
        session.stop()
        if jvm.poll() is None:
            os.kill(jvm.pid, signal.SIGTERM)
        try:
            jvm.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.kill(jvm.pid, signal.SIGKILL)
            jvm.wait()


def connect_url(session) -> str:
    """The Spark Connect address ``local_session``'s JVM serves."""
    return f"sc://127.0.0.1:{session.conf.get('spark.connect.grpc.binding.port')}"


def _wait_listening(port: int, jvm: subprocess.Popen) -> None:
    deadline = time.monotonic() + CONNECT_START_SECONDS
    while not _listening(port):
        if jvm.poll() is not None:
            raise RuntimeError(f"the Spark JVM exited with {jvm.returncode} before serving Spark Connect on {port}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the Spark JVM did not serve Spark Connect on {port} within {CONNECT_START_SECONDS} s")
        time.sleep(0.5)


def on_both_engines(spark, compute):
    """``compute(engine)`` on the embedded engine and on the spark one, which must start its session for it
    (so the Spark figures were computed on Spark, not embedded)."""
    from dsh_assets.core.engines import EMBEDDED, SPARK, engine_for
    from dsh_assets.core.files import DigestBook

    sessions = []
    embedded = compute(engine_for(EMBEDDED, DigestBook()))
    on_spark = compute(engine_for(SPARK, DigestBook(), lambda: sessions.append(spark) or spark))
    assert sessions, "the spark engine computed without its session"
    return embedded, on_spark
