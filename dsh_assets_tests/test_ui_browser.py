"""The Dagster UI as a user drives it, in headless Debian chromium: `dsh ui` on a home `dsh run` prepared.

Nothing starts by itself within the sensors' interval; "Materialize…" on the one `released` partition
launches a run that succeeds; under the daemon `dsh ui` starts (`dagster dev`), the release's evidence
and the period's report follow; the server is stopped by its PID (its process group). One configuration
(a releases file that declares only it) and a small source keep this to minutes.
"""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_assets.core.evidence.metrics import assets_of_kind
from dsh_assets.core.release.configs import ROW_RELEASE
from dsh_assets.core.release.synth import synthesize
from dsh_assets.graph.partitions import release_key
from dsh_assets_tests.browser import ARGS, chromium_or_skip
from dsh_assets_tests.conftest import (
    PERIOD,
    SMALL_ROWS,
    SMALL_SEED,
    SMALL_SUBSCRIBERS,
    SWEEP_TABLE,
    clean_environ,
    releases_text,
)
from dsh_assets_tests.test_webserver import (
    free_port,
    graphql,
    live_members,
    server_process,
    stop_group,
    wait_until_serving,
)

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

DSH = [sys.executable, "-m", "dsh_assets.cli"]
CONFIG = "c15_window_k5_noise5"
PARTITION = str(release_key(CONFIG, PERIOD))
RELEASE_SENSOR, AUTOMATION_SENSOR = "release_every_config", "evidence_follows_releases"
PERIOD_SCHEDULE = "release_period_schedule"
DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
"""Fires at 00:15 UTC (daily cadence): it materialises the source of the day just ended, and the sensor releases it."""
SENSOR_INTERVAL = 5
"""Both sensors' interval (seconds, ``DSH_SENSOR_INTERVAL``): what "nothing starts by itself" must outlast, and the
wait of each hop of the evidence that follows a release."""
DSH_RUN_JOBS = ["source_job", "release_job", "publication_job", "report_job"]
"""The runs `dsh run` makes for one period, one each: anything else was started by the UI or its daemon."""
RUN_TIMEOUT = 600
FOLLOW_TIMEOUT = 900

RUNS = """{ runsOrError { ... on Runs { results { runId status jobName startTime
    assetSelection { path } tags { key value } } } } }"""
TICKS = """{ repositoriesOrError { ... on RepositoryConnection { nodes {
    sensors { name sensorState { status ticks(limit: 100) { status skipReason runIds } } } } } } }"""
"""Every tick of the test (the latest first): at SENSOR_INTERVAL the daemon may tick several times while a loaded
machine still starts the webserver, and the first tick must stay in view."""
LATEST = """{ assetNodes(assetKeys: [%s]) { assetKey { path }
    assetMaterializations(partitions: ["%s"], limit: %d) { timestamp runId } } }"""


def only_config(config_id: str) -> str:
    """The packaged releases file with every other configuration and every sweep taken out, publishing the one
    configuration left."""
    text = re.sub(rf"(?ms)^\[configs\.(?!{re.escape(config_id)}\])[^\]]+\]\n.*?(?=^\[)", "", releases_text())
    text = SWEEP_TABLE.sub("", text)
    text, published = re.subn(r'(?m)^(\[publication\]\nconfig = )("[^"]*"|\[[^\]]*\])', rf'\1"{config_id}"', text)
    assert published == 1, "the packaged [publication] table no longer starts with its config"
    return text


@pytest.fixture(scope="module")
def prepared_home(tmp_path_factory):
    """A home where `dsh run` released the one configuration for PERIOD; the environment that declares it."""
    chromium_or_skip()  # before a minute of preparation
    root = tmp_path_factory.mktemp("ui")
    releases = root / "releases.toml"
    releases.write_text(only_config(CONFIG))
    source = root / "source.parquet"
    synthesize(source, rows=SMALL_ROWS, subscribers=SMALL_SUBSCRIBERS, seed=SMALL_SEED,
               period=dt.date.fromisoformat(PERIOD))
    environ = clean_environ(DSH_RELEASES=str(releases), DSH_SENSOR_INTERVAL=str(SENSOR_INTERVAL))
    home = root / "home"
    process = subprocess.run([*DSH, "run", "--source", str(source), "--period", PERIOD, "--home", str(home)],
                             env=environ, capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=root)
    assert process.returncode == 0, process.stderr[-3000:]
    return home, environ


@pytest.fixture
def dsh_ui(prepared_home, tmp_path):
    """`dsh ui` on the prepared home, on a free loopback port, in its own process group; stopped by its PID."""
    home, environ = prepared_home
    port, log_path = free_port(), tmp_path / "dsh_ui.log"
    with server_process([*DSH, "ui", "--home", str(home), "--port", str(port)], environ, log_path) as process:
        yield process, port, log_path


def runs(port: int) -> list[dict]:
    return graphql(port, RUNS)["data"]["runsOrError"]["results"]


def tags_of(run: dict) -> dict[str, str]:
    return {tag["key"]: tag["value"] for tag in run["tags"]}


def period_of(run: dict) -> str | None:
    """The period a run materialised: its partition's period dimension, or its one (period) partition."""
    tags = tags_of(run)
    return tags.get("dagster/partition/period", tags.get("dagster/partition"))


def sensor_ticks(port: int) -> dict[str, list[dict]]:
    (repository,) = graphql(port, TICKS)["data"]["repositoriesOrError"]["nodes"]
    return {sensor["name"]: sensor["sensorState"]["ticks"] for sensor in repository["sensors"]}


def ticked_twice(port: int) -> dict[str, list[dict]] | None:
    """Each sensor's ticks, once both have ticked at least twice (the first tick, and one after it)."""
    ticks = sensor_ticks(port)
    return ticks if all(len(ticks.get(name) or []) >= 2 for name in (RELEASE_SENSOR, AUTOMATION_SENSOR)) else None


def materialisations(port: int, assets, partition: str, limit: int) -> dict[str, list[dict]]:
    """Each asset's latest ``limit`` materialisations of ``partition``, newest first."""
    keys = ", ".join(f'{{path: ["{asset}"]}}' for asset in assets)
    nodes = graphql(port, LATEST % (keys, partition, limit))["data"]["assetNodes"]
    return {node["assetKey"]["path"][0]: node["assetMaterializations"] for node in nodes}


def latest_materialisations(port: int, assets, partition: str) -> dict[str, dict | None]:
    return {asset: next(iter(found), None) for asset, found in materialisations(port, assets, partition, 1).items()}


def wait_for(what: str, condition, timeout: float, log_path: Path, interval: float = 3.0):
    """Poll ``condition`` until it returns something truthy; fail naming ``what`` (and the server's log)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(interval)
    pytest.fail(f"{what}: not within {timeout:.0f} s\n{log_path.read_text()[-4000:]}")


def materialise_in_the_browser(port: int, log_path: Path) -> str:
    """Asset `released` -> "Materialize…" -> both dimensions' "All" (one config; one period, once a period the
    period schedule registered meanwhile is taken out) -> "Launch 1 run"; the UI's confirmation text.

    "All" is pressed again until the dialog counts the one partition: a dimension whose keys the dialog has not
    fetched yet selects nothing on "All" (seen on a loaded machine: "config: Select a partition"); "All" selects
    every key, it does not toggle."""
    from playwright.sync_api import expect, sync_playwright

    # A fresh instance greets a first visitor with a newsletter dialog that can swallow the first click: record it
    # as seen, as its "Skip" button does, before the browser opens a page.
    assert graphql(port, "mutation { setNuxSeen }")["data"]["setNuxSeen"] is True
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_or_skip(), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"http://127.0.0.1:{port}/assets/released", wait_until="networkidle")
            page.get_by_role("button", name="Materialize…").click()
            dialog = page.get_by_role("dialog")
            expect(dialog.get_by_text("Launch runs to materialize released")).to_be_visible(timeout=30_000)
            one_partition = dialog.get_by_text("1 partition", exact=True)

            def choose_the_partition() -> bool:
                for choose_all in dialog.get_by_role("button", name="All", exact=True).all():
                    choose_all.click()
                for chosen in dialog.locator("div[data-tooltip]").all():
                    key = chosen.get_attribute("data-tooltip") or ""
                    if DAY.fullmatch(key) and key != PERIOD:  # a period the schedule added meanwhile: out again
                        chosen.get_by_role("img", name="close").click()
                return one_partition.is_visible()

            wait_for("the dialog to count the one partition", choose_the_partition, 30, log_path, interval=1.0)
            expect(dialog).to_contain_text(CONFIG)
            expect(dialog).to_contain_text(PERIOD)
            dialog.get_by_role("button", name="Launch 1 run").click()
            confirmation = page.get_by_text(re.compile(r"Launched run \w+"))
            expect(confirmation).to_be_visible(timeout=30_000)
            return confirmation.inner_text()
        finally:
            browser.close()


def test_the_ui_starts_nothing_and_a_release_materialised_in_it_brings_its_evidence(dsh_ui):
    process, port, log_path = dsh_ui
    wait_until_serving(process, port, log_path)

    # Nothing starts by itself: both sensors tick twice (the first tick and one after it) and launch nothing for
    # PERIOD. A test spanning the period schedule's minute (CRON) also sees that clock's runs, of another period.
    ticks = wait_for("two ticks of each sensor", lambda: ticked_twice(port), 180 + 2 * SENSOR_INTERVAL, log_path)
    before = {run["runId"]: run for run in runs(port)}
    launched = [before[run_id] for name in (RELEASE_SENSOR, AUTOMATION_SENSOR) for tick in ticks[name]
                for run_id in tick["runIds"]]
    assert all(period_of(run) != PERIOD for run in launched), ticks
    # Its first tick (no cursor yet) saw the demo's source and skipped it; later ticks see nothing new.
    assert any("already released from the same source bytes" in (tick["skipReason"] or "")
               for tick in ticks[RELEASE_SENSOR]), ticks
    of_period = [run["jobName"] for run in before.values() if period_of(run) == PERIOD]
    assert sorted(of_period) == sorted(DSH_RUN_JOBS), "a run started by itself"
    clock = [run for run in before.values() if period_of(run) != PERIOD]
    assert not clock or any(tags_of(run).get("dagster/schedule_name") == PERIOD_SCHEDULE for run in clock), clock

    # "Materialize…" on the one partition of `released`, in the browser.
    confirmation = materialise_in_the_browser(port, log_path)
    run_id_prefix = confirmation.split()[-1]
    launched = wait_for("the run launched from the UI", lambda: next(
        (run for run in runs(port) if run["runId"].startswith(run_id_prefix)), None), 60, log_path)
    assert [asset["path"] for asset in launched["assetSelection"]] == [["released"]]
    assert {tag["key"]: tag["value"] for tag in launched["tags"]}["dagster/partition"] == PARTITION
    finished = wait_for("the released run to finish", lambda: next(
        (run for run in runs(port) if run["runId"] == launched["runId"]
         and run["status"] in {"SUCCESS", "FAILURE", "CANCELED"}), None), RUN_TIMEOUT, log_path)
    assert finished["status"] == "SUCCESS", finished

    # The evidence of the release, then the period's report, follow under the daemon.
    released_at = float(latest_materialisations(port, ["released"], PARTITION)["released"]["timestamp"])
    evidence = [asset for asset in assets_of_kind(ROW_RELEASE) if asset != "released"]

    def evidence_after_release():
        latest = latest_materialisations(port, evidence, PARTITION)
        return latest if all(m and float(m["timestamp"]) > released_at for m in latest.values()) else None

    followed = wait_for("every evidence asset after the release", evidence_after_release, FOLLOW_TIMEOUT, log_path)
    evidence_done = max(float(m["timestamp"]) for m in followed.values())

    def report_after_evidence():
        report = latest_materialisations(port, ["release_report"], PERIOD)["release_report"]
        return report if report and float(report["timestamp"]) > evidence_done else None

    report = wait_for("the period's report after the evidence", report_after_evidence, FOLLOW_TIMEOUT, log_path)
    # ...and not also beside it: no report of the period was made between the release and its last evidence.
    since_release = [float(m["timestamp"]) for m in materialisations(port, ["release_report"], PERIOD, 5)["release_report"]
                     if float(m["timestamp"]) > released_at]
    assert all(made > evidence_done for made in since_release), (released_at, evidence_done, since_release)
    by_id = {run["runId"]: run for run in runs(port)}
    for materialisation in [*followed.values(), report]:
        tags = tags_of(by_id[materialisation["runId"]])
        assert tags.get("dagster/sensor_name") == AUTOMATION_SENSOR, tags

    stop_group(process)
    assert process.poll() is not None and live_members(process.pid) == [], "a process of `dsh ui` survived"
