"""Release partition keys, as runs carry them and as the instance stores them."""

import dagster as dg

from dsh_assets.graph.partitions import PERIODS, config_and_period, register_period, release_key


def test_a_release_key_reads_back_as_its_configuration_and_period():
    key = release_key("c22_hour_k5_shuffle_code10_round3", "2026-11-02")
    assert config_and_period(key) == ("c22_hour_k5_shuffle_code10_round3", "2026-11-02")
    assert config_and_period(str(key)) == ("c22_hour_k5_shuffle_code10_round3", "2026-11-02")  # as stored


def test_a_period_is_registered_once():
    instance = dg.DagsterInstance.ephemeral()
    assert register_period(instance, "2026-11-02") is True
    assert register_period(instance, "2026-11-02") is False
    assert instance.get_dynamic_partitions(PERIODS.name) == ["2026-11-02"]
