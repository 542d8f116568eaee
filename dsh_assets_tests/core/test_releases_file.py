"""The releases file as one typed value: one read, every table parsed as its own loader parses it."""

from importlib import resources

import pytest

from dsh_assets.core import releases_file
from dsh_assets.core.publication.gate import load_publication
from dsh_assets.core.release.configs import ConfigError, load_configs, parse_budget_caps, releases_document
from dsh_assets.core.release.schema import load_schema
from dsh_assets.core.releases_file import ReleasesFile
from dsh_assets.core.retention import load_retention
from dsh_assets.core.utility.quality_groups import UtilitySettings, parse_utility

SCHEMA = load_schema()


def test_every_table_is_what_its_own_loader_reads_from_one_read(monkeypatch):
    reads = []

    def counted(path=None):
        reads.append(path)
        return releases_document(path)

    monkeypatch.setattr(releases_file, "releases_document", counted)
    value = ReleasesFile.read(None, SCHEMA)
    assert reads == [None]
    configs = load_configs(None, SCHEMA)
    assert value.configs == configs
    assert value.publication == load_publication(None, configs)
    assert value.retention == load_retention()
    assert value.budget_caps == parse_budget_caps(releases_document(None))
    assert value.utility == parse_utility(releases_document(None)) == UtilitySettings(1000, 0.3)
    assert value.attacker.sample_size > 0


def test_a_bad_table_is_refused_when_the_file_is_read(tmp_path):
    """Whichever table is wrong (here [retention], which only `dsh purge` uses), the file is refused as a whole,
    with the table named."""
    packaged = resources.files("dsh_assets").joinpath("releases.toml").read_text()
    assert "\nsource_days = 30\n" in packaged
    broken = tmp_path / "releases.toml"
    broken.write_text(packaged.replace("\nsource_days = 30\n", "\nsource_days = -1\n"))
    with pytest.raises(ConfigError, match="retention"):
        ReleasesFile.read(broken, SCHEMA)


def test_a_synthetic_table_without_its_own_budget_slice_is_refused_by_name(tmp_path):
    packaged = resources.files("dsh_assets").joinpath("releases.toml").read_text()
    start = packaged.index("\n[budget.dp_synthetic]") + 1
    end = packaged.index("year_cap = 366.0\n", start) + len("year_cap = 366.0\n")
    unsliced = tmp_path / "unsliced.toml"
    unsliced.write_text(packaged[:start] + packaged[end:])
    with pytest.raises(ConfigError, match=r"dp_synthetic_eps1: .*\[budget\.dp_synthetic\]"):
        ReleasesFile.read(unsliced, SCHEMA)
    inverted = tmp_path / "inverted.toml"
    inverted.write_text(packaged[:start] + "[budget.dp_synthetic]\nperiod_cap = 5.0\nyear_cap = 1.0\n" + packaged[end:])
    with pytest.raises(ConfigError, match=r"\[budget\.dp_synthetic\]: need 0 < period_cap <= year_cap"):
        ReleasesFile.read(inverted, SCHEMA)
    assert ReleasesFile.read(None, SCHEMA).budget_caps.synthetic.period_cap == 1.0
