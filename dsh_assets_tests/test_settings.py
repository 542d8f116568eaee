"""The DSH_* settings that shape the graph itself: here, how often the daemon evaluates the sensors."""

from __future__ import annotations

import pytest

from dsh_assets.cli import main as dsh
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


def test_dsh_refuses_a_bad_interval_in_one_line_before_it_makes_a_home(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DSH_SENSOR_INTERVAL", "soon")
    assert dsh(["verify", "--home", str(tmp_path / "home")]) == 2
    assert capsys.readouterr().err == ("dsh verify: DSH_SENSOR_INTERVAL='soon': must be a whole number of seconds, "
                                       "at least 1\n")
    assert not (tmp_path / "home").exists()
