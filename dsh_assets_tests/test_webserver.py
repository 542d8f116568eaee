"""Start the Dagster webserver on loopback as a user would, ask it for the asset graph, stop it by PID."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from dsh_assets.core.release.configs import DP_COUNTS, ROW_RELEASE, load_configs
from dsh_assets.core.layout import CHECKOUT, Layout
from dsh_assets.graph.instance import prepare_dagster_home
from dsh_assets_tests.conftest import clean_environ

pytestmark = pytest.mark.e2e

START_TIMEOUT = 90.0
STOP_GRACE = 10.0
ASSETS_QUERY = """
{
  assetNodes {
    assetKey { path }
    partitionKeysByDimension { name partitionKeys }
  }
  workspaceOrError {
    __typename
    ... on Workspace {
      locationEntries {
        name
        locationOrLoadError { __typename ... on PythonError { message } }
      }
    }
  }
}
"""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _default_signals() -> None:
    # A non-interactive parent may leave SIGINT/SIGTERM ignored; the server would inherit that.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def live_members(pgid: int) -> list[int]:
    """PIDs of the process group that are not zombies (read from /proc)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        state, group = fields[0], int(fields[2])
        if group == pgid and state != "Z":
            members.append(int(stat.parent.name))
    return members


def stop_group(process: subprocess.Popen) -> None:
    """SIGTERM to the server's process group, a grace period, then SIGKILL; by PID only."""
    pgid = process.pid  # start_new_session: the server leads its own group
    if process.poll() is None:
        os.killpg(pgid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:
            pass
    deadline = time.monotonic() + STOP_GRACE
    while live_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if live_members(pgid):
        os.killpg(pgid, signal.SIGKILL)
    process.wait(timeout=STOP_GRACE)
    deadline = time.monotonic() + STOP_GRACE  # a killed process is a member until the kernel has torn it down
    while live_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)


@contextlib.contextmanager
def server_process(command: list[str], environ: dict[str, str], log_path: Path, cwd: Path | None = None):
    """A server in its own process group, its output in ``log_path``; stopped by its PID when the block ends."""
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, cwd=cwd, env=environ, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_default_signals)
    try:
        yield process
    finally:
        stop_group(process)


def outward_address() -> str | None:
    """This machine's address on its default route (no packet is sent), or None without one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.254", 9))
        except OSError:
            return None
        address = probe.getsockname()[0]
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def refuses_connections(address: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(2)
        try:
            probe.connect((address, port))
        except OSError:
            return True
    return False


def get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, response.read()


def graphql(port: int, query: str) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


@pytest.fixture
def webserver(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    # prepare_dagster_home points os.environ["DAGSTER_HOME"] at the home: let monkeypatch restore it.
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "placeholder"))
    dagster_home = prepare_dagster_home(Layout(home))
    assert (dagster_home / "dagster.yaml").is_file()
    port = free_port()
    log_path = tmp_path / "webserver.log"
    command = [str(Path(sys.executable).with_name("dagster-webserver")), "-w", str(CHECKOUT / "workspace.yaml"),
               "-h", "127.0.0.1", "-p", str(port)]
    with server_process(command, clean_environ(DSH_HOME=str(home), DAGSTER_HOME=str(dagster_home)), log_path,
                        cwd=CHECKOUT) as process:
        yield process, port, log_path


def wait_until_serving(process: subprocess.Popen, port: int, log_path: Path) -> dict:
    deadline = time.monotonic() + START_TIMEOUT
    last_error = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"dagster-webserver exited with {process.returncode}:\n{log_path.read_text()[-4000:]}")
        try:
            status, body = get(f"http://127.0.0.1:{port}/server_info")
            if status == 200:
                return json.loads(body)
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as error:
            last_error = error
        time.sleep(0.5)
    pytest.fail(f"dagster-webserver did not answer within {START_TIMEOUT:.0f} s ({last_error}):\n"
                f"{log_path.read_text()[-4000:]}")


def test_webserver_serves_the_asset_graph_on_loopback_and_stops_by_pid(webserver):
    process, port, log_path = webserver
    info = wait_until_serving(process, port, log_path)
    assert info.get("dagster_webserver_version"), info

    answer = graphql(port, ASSETS_QUERY)
    assert "errors" not in answer, answer
    data = answer["data"]
    entries = data["workspaceOrError"]["locationEntries"]
    load_errors = [e["locationOrLoadError"] for e in entries
                   if e["locationOrLoadError"]["__typename"] == "PythonError"]
    assert not load_errors, f"the code location failed to load: {load_errors}\n{log_path.read_text()[-4000:]}"
    nodes = {"/".join(node["assetKey"]["path"]): node for node in data["assetNodes"]}
    assert {"source", "released", "dp_release"} <= set(nodes), sorted(nodes)

    configs = load_configs()
    for asset, kind in (("released", ROW_RELEASE), ("dp_release", DP_COUNTS)):
        dimensions = {d["name"]: d["partitionKeys"] for d in nodes[asset]["partitionKeysByDimension"]}
        assert set(dimensions) == {"config", "period"}
        assert list(dimensions["config"]) == [cid for cid, config in configs.items() if config.kind == kind]
    assert "c15_window_k5_noise5" in {d["name"]: d["partitionKeys"]
                                      for d in nodes["released"]["partitionKeysByDimension"]}["config"]

    # Loopback only: the server does not answer on this machine's outward address.
    outward = outward_address()
    if outward is not None:
        assert refuses_connections(outward, port), f"dagster-webserver listens on {outward}:{port}"

    assert process.poll() is None
    started_stop = time.monotonic()
    stop_group(process)
    assert process.poll() is not None, "dagster-webserver is still running"
    assert live_members(process.pid) == [], "a process of the webserver's group survived"
    assert time.monotonic() - started_stop < 3 * STOP_GRACE
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        get(f"http://127.0.0.1:{port}/server_info", timeout=2)
