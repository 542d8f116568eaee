"""DSH_* settings checked when they are read: how often the daemon evaluates the sensors, DuckDB's memory limit."""

from __future__ import annotations

import pytest

from dsh_assets.cli import main as dsh
from dsh_assets.core.duck import DEFAULT_MEMORY_LIMIT
from dsh_assets.definitions import build_defs, settings_from_environment
from dsh_assets.graph.resources import DEFAULT_SENSOR_INTERVAL
from dsh_assets.settings import environment_settings

SENSORS = ("release_every_config", "evidence_follows_releases")


def sensor_intervals(defs) -> dict[str, int]:
    return {sensor.name: sensor.minimum_interval_seconds for sensor in defs.sensors}


def test_both_sensors_tick_every_30_s_unless_dsh_sensor_interval_says_otherwise(tmp_path, monkeypatch):
    assert DEFAULT_SENSOR_INTERVAL == 30
    monkeypatch.setenv("DSH_HOME", str(tmp_path))
    assert sensor_intervals(build_defs(settings_from_environment())) == dict.fromkeys(SENSORS, 30)
    monkeypatch.setenv("DSH_SENSOR_INTERVAL", "7")
    assert sensor_intervals(build_defs(settings_from_environment())) == dict.fromkeys(SENSORS, 7)


@pytest.mark.parametrize("value", ["0", "-5", "1.5", "soon"])
def test_an_interval_that_is_not_a_whole_number_of_seconds_is_refused_by_name(value):
    with pytest.raises(ValueError, match=rf"^DSH_SENSOR_INTERVAL='{value}': must be a whole number of seconds"):
        environment_settings({"DSH_SENSOR_INTERVAL": value})


@pytest.mark.parametrize(("given", "kept"), [(None, DEFAULT_MEMORY_LIMIT), ("", DEFAULT_MEMORY_LIMIT), (" 2GB ", "2GB"),
                                             ("512 MiB", "512 MiB"), ("80%", "80%")])
def test_a_memory_limit_duckdb_takes_is_kept_and_an_unset_one_is_the_default(given, kept):
    assert DEFAULT_MEMORY_LIMIT == "1GB"
    environ = {} if given is None else {"DSH_DUCKDB_MEMORY_LIMIT": given}
    assert environment_settings(environ)["duckdb_memory_limit"] == kept


@pytest.mark.parametrize("value", ["lots", "1000", "1,5GB"])
def test_a_memory_limit_duckdb_does_not_take_is_refused_by_name(value):
    with pytest.raises(ValueError, match=rf"^DSH_DUCKDB_MEMORY_LIMIT='{value}': DuckDB does not take it as a memory "
                                         r"limit \(Parser Error: .+\); write a size such as 2GB or 512MB$"):
        environment_settings({"DSH_DUCKDB_MEMORY_LIMIT": value})


@pytest.mark.parametrize(("name", "value", "why"), [
    ("DSH_SENSOR_INTERVAL", "soon", "must be a whole number of seconds, at least 1"),
    ("DSH_WORKERS", "0", "must be a whole number of workers, at least 1"),
    ("DSH_DUCKDB_MEMORY_LIMIT", "lots", "DuckDB does not take it as a memory limit (Parser Error: Memory must have a "
                                        "number (e.g. 1GB)); write a size such as 2GB or 512MB"),
])
def test_dsh_refuses_a_bad_setting_in_one_line_before_it_makes_a_home(tmp_path, monkeypatch, capsys, name, value, why):
    monkeypatch.setenv(name, value)
    assert dsh(["verify", "--home", str(tmp_path / "home")]) == 2
    assert capsys.readouterr().err == f"dsh verify: {name}={value!r}: {why}\n"
    assert not (tmp_path / "home").exists()
