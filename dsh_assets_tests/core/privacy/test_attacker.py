"""The ``[attacker]`` table: its defaults, what anonymeter knows unless told, and a one-line refusal of every
malformed key."""

import pytest

from dsh_assets.core.privacy.attacker import AnonymeterSettings, parse_attacker
from dsh_assets.core.release.configs import ConfigError, releases_document
from dsh_assets.core.release.schema import load_schema
from dsh_assets_tests.core.privacy.test_informed_match import DOWNLOAD, DURATION, LATENCY

SCHEMA = load_schema()


def test_the_packaged_attacker_is_the_default_one():
    packaged = parse_attacker({"attacker": {}}, SCHEMA)
    assert [list(s) for s in packaged.knowledge_sets] == [
        [DOWNLOAD], [DOWNLOAD, LATENCY], [DOWNLOAD, LATENCY, DURATION], ["ul_volume_kb", "dl_volume_kb", DURATION]]
    assert packaged.anonymeter.known == (DOWNLOAD, LATENCY, DURATION)


def test_the_packaged_releases_file_states_every_default_of_the_table():
    assert parse_attacker(releases_document(), SCHEMA) == parse_attacker({}, SCHEMA)


def test_a_releases_file_without_the_table_is_judged_by_the_default_attacker():
    model = parse_attacker({}, SCHEMA)
    assert model == parse_attacker({"attacker": {"anonymeter": {}}}, SCHEMA)
    assert (model.knowledge_error, model.sample_size, model.sample_seed) == (0.0, 1000, 2028)
    # the parser's defaults are the settings' own
    assert model.anonymeter == AnonymeterSettings(known=(DOWNLOAD, LATENCY, DURATION))


def test_anonymeter_knows_the_first_longest_knowledge_set_unless_told():
    sets = [[DOWNLOAD], [LATENCY, DURATION], ["cqi", "jitter_ms"]]
    assert parse_attacker({"attacker": {"known_measurements": sets}}, SCHEMA).anonymeter.known == (LATENCY, DURATION)
    told = {"known_measurements": sets, "anonymeter": {"known": ["cqi"]}}
    assert parse_attacker({"attacker": told}, SCHEMA).anonymeter.known == ("cqi",)


def test_without_the_roles_any_column_name_is_taken():
    model = parse_attacker({"attacker": {"known_measurements": [["speed"]]}})
    assert model.knowledge_sets == (("speed",),) and model.anonymeter.known == ("speed",)


def test_the_closed_ends_of_each_range_are_accepted():
    table = {"knowledge_error": 0, "sample_size": 1, "sample_seed": 0,
             "anonymeter": {"attacks": 1, "block_rows": 1, "cpu_seconds": 0.5, "seed": 0, "common_value_share": 1}}
    model = parse_attacker({"attacker": table}, SCHEMA)
    assert (model.knowledge_error, model.sample_size, model.sample_seed) == (0.0, 1, 0)
    settings = model.anonymeter
    assert (settings.attacks, settings.block_rows, settings.cpu_seconds, settings.seed) == (1, 1, 0.5, 0)
    assert settings.common_value_share == 1.0 and type(settings.common_value_share) is float


@pytest.mark.parametrize("table, named", [
    ({"known_measurements": [[DOWNLOAD, "dl_speed"]]}, "'dl_speed' is not a measurement of the roles file"),
    ({"known_measurements": [[]]}, "non-empty list"),
    ({"known_measurements": []}, "known_measurements must be a non-empty list of knowledge sets, not []"),
    ({"known_measurements": [[DOWNLOAD, DOWNLOAD]]}, "names a column twice"),
    ({"knowledge_error": 1.5}, "knowledge_error must be a number in [0, 1)"),
    ({"knowledge_error": 1.0}, "knowledge_error must be a number in [0, 1), not 1.0"),
    ({"knowledge_error": False}, "knowledge_error must be a number in [0, 1), not False"),  # not 0.0
    ({"sample_size": 0}, "sample_size must be a positive integer, not 0"),
    ({"sample_size": True}, "sample_size must be a positive integer, not True"),
    ({"sample_seed": -1}, "sample_seed must be a non-negative integer, not -1"),
    ({"anonymeter": {"known": ["msisdn"]}}, "'msisdn' is not a measurement"),
    ({"anonymeter": {"holdout_share": 0.5}}, "holdout_share is no longer a setting: the control is the other half"),
    ({"anonymeter": {"cpu_seconds": 0}}, "cpu_seconds must be a positive number of CPU seconds"),
    ({"anonymeter": {"light_cpu_seconds": float("inf")}}, "anonymeter.light_cpu_seconds must be a positive number"),
    ({"anonymeter": {"attacks": 0}}, "anonymeter.attacks must be a positive integer, not 0"),
    ({"anonymeter": {"seed": True}}, "anonymeter.seed must be a non-negative integer, not True"),
    ({"anonymeter": {"common_value_share": 1.5}}, "common_value_share must be a share in (0, 1]"),
    ({"anonymeter": {"common_value_share": 0}}, "common_value_share must be a share in (0, 1], not 0"),
    ({"anonymeter": {"blocks": 3}}, "anonymeter: unknown keys ['blocks']"),
    ({"anonymeter": 5}, "anonymeter must be a table, not 5"),
    ({"knowledge": []}, "unknown keys ['knowledge']"),
    (["sample_size"], "must be a table, not ['sample_size']"),
])
def test_a_malformed_attacker_is_refused_in_one_line(table, named):
    with pytest.raises(ConfigError) as refused:
        parse_attacker({"attacker": table}, SCHEMA)
    assert named in str(refused.value) and "\n" not in str(refused.value)
    assert str(refused.value).startswith("[attacker]")
