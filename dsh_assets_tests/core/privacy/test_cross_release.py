"""Cross-release and cross-period linkage on hand-built tables (answers worked out in the comments),
and on the real generator at a small size."""

import dataclasses
import datetime as dt
import json
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsh_assets.core.files import DigestBook
from dsh_assets.core.privacy import cross_release
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.release.configs import load_configs
from dsh_assets.core.release.schema import load_schema
from dsh_assets.core.secrets import Secrets
from dsh_assets.core.release.source import ingest_source
from dsh_assets.core.release.synth import synthesize
from dsh_assets.core.release import transform
from dsh_assets.core.release.transform import ALIAS_COLUMN, release
from dsh_assets.core.release.values import cell_runs
from dsh_assets_tests.tables import RELEASE_PERIOD, row, write

SCHEMA = load_schema()
CONFIGS = load_configs(schema=SCHEMA)
SECRETS = Secrets(b"cross-seed", b"cross-key", "test")
ALIAS_NO_PROTECTION = dataclasses.replace(CONFIGS["c16_window_k5_noise5_key"], k=0, noise_scale=0.0)
FIGURE_KEYS = {
    "cross_release_relinked", "cross_release_relinked_ci", "cross_release_relinked_baseline",
    "cross_release_relinked_risk", "cross_release_n", "cross_release_aliases_relinked",
    "cross_period_aliases_relinked", "cross_release_strength",
}


def release_of(directory, rows, config, name="release", secrets=SECRETS,
               period=RELEASE_PERIOD) -> tuple[ReleaseUnderTest, tuple]:
    raw = write(directory / f"{name}.raw.parquet", rows)
    source = directory / f"{name}.source.parquet"
    summary = ingest_source(raw, source, SCHEMA, book=DigestBook())
    out = directory / f"{name}.parquet"
    plan = release(source, out, config, SCHEMA, secrets, summary.apps, period=period, book=DigestBook())
    return ReleaseUnderTest(source, out, config, SCHEMA, plan, book=DigestBook()), summary.apps


def evaluate_against_second(target: ReleaseUnderTest, apps, **kwargs):
    return cross_release.evaluate(target, cross_release.make_second_release(target, SECRETS, apps), **kwargs)


def three_cells() -> list[dict]:
    """Six rows with distinct measurement vectors: cell X has 3 rows, Y 2 rows, Z 1 row."""
    x = [row(f"35843000000{i}", 0, app="Gaming", value=10.0 * i) for i in (1, 2, 3)]
    y = [row(f"35843100000{i}", 10, app="IM", value=5.0 * i, jitter_ms=0.0) for i in (1, 2)]  # zeros: log(0 + eps)
    z = [row("358432000001", 20, province="Lappi", app="Music", value=7.0)]
    return x + y + z


def test_without_noise_rows_with_distinct_measurements_relink_perfectly(tmp_path):
    target, apps = release_of(tmp_path, three_cells(), CONFIGS["id_removal"])
    result = evaluate_against_second(target, apps)
    figures = result.figures()
    # id_removal has no noise: the second release has the same values, so each row's nearest row of its
    # cell (distance 0; the others differ) is itself: 6/6 relinked. Chance of a random pick in the cell:
    # mean of 1/size = (3 * 1/3 + 2 * 1/2 + 1 * 1) / 6 = 0.5; risk = (1 - 0.5) / (1 - 0.5) = 1.
    assert figures["cross_release_n"] == 6
    assert figures["cross_release_relinked"] == 1.0
    assert figures["cross_release_relinked_baseline"] == pytest.approx(0.5)
    assert figures["cross_release_relinked_risk"] == pytest.approx(1.0)
    assert figures["cross_release_aliases_relinked"] is None
    assert figures["cross_period_aliases_relinked"] is None
    assert set(figures) == FIGURE_KEYS
    assert sorted(path.name for path in tmp_path.iterdir()) == ["release.parquet", "release.raw.parquet",
                                                                 "release.source.parquet"]  # B is never written


def test_the_second_release_has_the_same_rows_and_other_noise_and_aliases(tmp_path):
    target, apps = release_of(tmp_path, three_cells(), dataclasses.replace(CONFIGS["c16_window_k5_noise5_key"], k=0))
    second = cross_release.make_second_release(target, SECRETS, apps)
    stored, other = pq.read_table(target.released_path), second.rows(target.released_row_ids()).read_all()
    assert other.num_rows == stored.num_rows == 6
    assert other.column("dl_throughput_kbps") != stored.column("dl_throughput_kbps")
    assert not set(other.column(ALIAS_COLUMN).to_pylist()) & set(stored.column(ALIAS_COLUMN).to_pylist())


def test_the_second_release_plan_is_not_kept_after_the_step(tmp_path):
    # The stored release's plan is cached for the run's other steps; the second one would add as much again.
    target, apps = release_of(tmp_path, three_cells(), CONFIGS["c15_window_k5_noise5"])
    made = transform._stored_plan.cache_info().misses
    second = cross_release.make_second_release(target, SECRETS, apps)
    assert transform._stored_plan.cache_info().misses == made
    assert np.array_equal(second.plan.keep, target.keep)


def test_alias_relinking_and_the_same_key_across_periods(tmp_path):
    # Period 1: subscribers S1, S2, S3. Period 2: S2, S3, S4, in other rows (other windows and values).
    first = [row(f"35844000000{i}", 0, app="Gaming", value=float(i)) for i in (1, 2, 3)]
    now = [row(f"35844000000{i}", 30, app="IM", value=10.0 + i) for i in (2, 3, 4)]
    forever = dataclasses.replace(ALIAS_NO_PROTECTION, alias_scope="forever")
    previous, _ = release_of(tmp_path, first, forever, name="p1", period="2026-11-20")
    current, apps = release_of(tmp_path, now, forever, name="p2", period="2026-11-21")
    figures = evaluate_against_second(current, apps, previous_period=previous).figures()
    # No noise: every row, hence every alias, of period 2 relinks to its twin: 3/3 aliases.
    assert figures["cross_release_relinked"] == 1.0
    assert figures["cross_release_aliases_relinked"] == 1.0
    # One alias key for both periods: S2's and S3's aliases are found again, with the same subscriber;
    # S4 is new: 2 of the 3 aliases of period 2.
    assert figures["cross_period_aliases_relinked"] == pytest.approx(2 / 3)
    # A key rotated between periods links nobody: 0/3.
    rotated, _ = release_of(tmp_path, first, forever, name="p1_rotated", period="2026-11-20",
                            secrets=Secrets(b"cross-seed", b"another-key", "test"))
    result = evaluate_against_second(current, apps, previous_period=rotated)
    assert result.figures()["cross_period_aliases_relinked"] == 0.0
    assert result.metadata()["cross_period_returning_subscribers"] == 2
    # Without an alias there is nothing to link periods by: None, and the reason in metadata.
    no_alias = dataclasses.replace(CONFIGS["c15_window_k5_noise5"], k=0, noise_scale=0.0)
    previous, _ = release_of(tmp_path, first, no_alias, name="p1_no_alias")
    current, apps = release_of(tmp_path, now, no_alias, name="p2_no_alias")
    result = evaluate_against_second(current, apps, previous_period=previous)
    assert result.figures()["cross_period_aliases_relinked"] is None
    assert "no alias" in result.metadata()["cross_period_note"]


def test_fully_suppressed_release_relinks_nothing_and_raises_nothing(tmp_path):
    suppressed = dataclasses.replace(CONFIGS["c16_window_k5_noise5_key"], k=10**6)
    target, apps = release_of(tmp_path, three_cells(), suppressed)
    figures = evaluate_against_second(target, apps, previous_period=target).figures()
    assert figures["cross_release_n"] == 0 and figures["cross_release_relinked"] == 0.0
    assert figures["cross_release_aliases_relinked"] == 0.0
    assert figures["cross_period_aliases_relinked"] == 0.0
    light = cross_release.evaluate_light(target, SECRETS, apps, tmp_path / "light", 200).figures()
    assert light["cross_release_n"] == 0 and light["cross_release_strength"] == "light"


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """The real generator at a small size: 20,000 rows, 4,000 subscribers."""
    directory = tmp_path_factory.mktemp("cross_release_synthetic")
    synthesize(directory / "raw.parquet", rows=20_000, subscribers=4_000, period=dt.date(2026, 11, 20))
    summary = ingest_source(directory / "raw.parquet", directory / "source.parquet", SCHEMA, book=DigestBook())

    def make(config) -> ReleaseUnderTest:
        out = directory / f"{config.id}_{config.noise_scale}.parquet"
        plan = release(directory / "source.parquet", out, config, SCHEMA, SECRETS, summary.apps, period=RELEASE_PERIOD,
                       book=DigestBook())
        return ReleaseUnderTest(directory / "source.parquet", out, config, SCHEMA, plan, book=DigestBook())

    return make, summary.apps, directory


def test_noise_of_c15_leaves_rows_relinkable_and_heavy_noise_brings_it_towards_chance(synthetic):
    make, apps, directory = synthetic
    c15 = CONFIGS["c15_window_k5_noise5"]
    figures = evaluate_against_second(make(c15), apps, sample_size=300).figures()
    # Measured, not hoped: 14 measurements each multiplied by exp(Laplace(0, 0.05)) stay far nearer their
    # twin (log distance about 14 x 0.075) than any other row of the cell, so about every row relinks.
    assert figures["cross_release_relinked"] > 0.95
    assert figures["cross_release_relinked_baseline"] < 0.2
    # Noise of scale 1.0 (not a shipped configuration) is needed to bring it well below 1, still above chance.
    heavy = evaluate_against_second(make(dataclasses.replace(c15, noise_scale=1.0)), apps,
                                    sample_size=300).figures()
    assert heavy["cross_release_relinked_baseline"] + 0.1 < heavy["cross_release_relinked"] < 0.6


@pytest.mark.parametrize("config_id", ["c15_window_k5_noise5", "c16_window_k5_noise5_key"])
@pytest.mark.parametrize("every", [7, 101])
def test_the_computed_rows_of_the_second_release_are_those_its_written_release_holds(synthetic, config_id, every):
    # B is computed for the probed cells instead of written: any of its rows, computed, is the row the whole
    # written release holds at that position (so the relinking picks, and every figure, are the same). Every
    # 101st row is few enough to be read through DuckDB; every 7th is read batch by batch.
    make, apps, directory = synthetic
    target = make(CONFIGS[config_id])
    second = cross_release.make_second_release(target, SECRETS, apps)
    written = directory / f"{config_id}.second.parquet"
    release(target.source_path, written, target.config, SCHEMA, SECRETS.derived(cross_release.SECOND_RELEASE_LABEL),
            apps, period=RELEASE_PERIOD, book=DigestBook())
    whole = pq.read_table(written)
    some = target.released_row_ids()[::every]  # rows of many cells, from several source batches
    assert (len(some) * cross_release._FEW_ROWS <= len(target.keep)) == (every == 101)
    computed = second.rows(some).read_all()
    expected = whole.take(pa.array(computed.column("pos"))).append_column("pos", computed.column("pos"))
    assert computed.num_rows == len(some) and computed.equals(expected)
    assert second.positions_of(np.sort(some)).tolist() == computed.column("pos").to_pylist()  # row id order
    assert cross_release.evaluate(target, second, sample_size=300).figures()["cross_release_n"] == 300


def test_fixed_seeds_give_the_same_figures_twice_and_metadata_carries_no_truth(synthetic):
    make, apps, directory = synthetic
    target = make(CONFIGS["c16_window_k5_noise5_key"])
    second = cross_release.make_second_release(target, SECRETS, apps)
    first = cross_release.evaluate(target, second, sample_size=300, alias_sample_size=50)
    again = cross_release.evaluate(target, second, sample_size=300, alias_sample_size=50)
    assert first.figures() == again.figures()
    assert first.figures()["cross_release_aliases_relinked"] > 0.9
    text = json.dumps(first.metadata())  # plain values only
    assert not re.search(r"s_[0-9a-f]{20}", text)  # no alias
    assert not re.search(r"3584\d{8}", text)  # no subscriber number
    assert first.metadata()["assumptions"] == cross_release.ASSUMPTIONS


def test_an_alias_of_one_period_is_not_found_in_the_next_under_period_scope(tmp_path):
    """alias_scope = "period" (the default): the same subscribers, the same secret, two periods, no shared alias."""
    assert ALIAS_NO_PROTECTION.alias_scope == "period"
    rows = [row(f"35844000000{i}", 0, app="Gaming", value=float(i)) for i in (1, 2, 3)]
    first, _ = release_of(tmp_path, rows, ALIAS_NO_PROTECTION, name="d1", period="2026-11-20")
    second, apps = release_of(tmp_path, rows, ALIAS_NO_PROTECTION, name="d2", period="2026-11-21")
    one = set(pq.read_table(first.released_path).column(ALIAS_COLUMN).to_pylist())
    two = set(pq.read_table(second.released_path).column(ALIAS_COLUMN).to_pylist())
    assert len(one) == len(two) == 3 and not one & two
    result = evaluate_against_second(second, apps, previous_period=first)
    assert result.figures()["cross_period_aliases_relinked"] == 0.0
    assert result.metadata()["cross_period_returning_subscribers"] == 3


@pytest.mark.parametrize("config_id", ["c16_window_k5_noise5_key", "c22_hour_k5_shuffle_code10_round3"])
def test_a_light_evaluation_makes_its_second_release_for_the_probed_cells_alone(synthetic, tmp_path, config_id):
    """The light probe's cells, each whole, and nothing else: a far smaller second release that finds what the
    full one finds (noise of c16 relinks nearly every row and alias; c22's shuffle leaves the cell's chance)."""
    make, apps, directory = synthetic
    target = make(CONFIGS[config_id])
    second = cross_release.light_second_release(target, SECRETS, apps, tmp_path, 100, 20)
    starts = cell_runs(target.plan.cell_sizes, target.plan.k)
    held = set(second.source_row_ids.tolist())
    order = target.released_row_ids()
    touched = [c for c in range(len(starts) - 1) if held & set(order[starts[c]:starts[c + 1]].tolist())]
    assert all(set(order[starts[c]:starts[c + 1]].tolist()) <= held for c in touched)  # whole cells
    assert len(held) == sum(int(starts[c + 1] - starts[c]) for c in touched) < len(order) / 2
    assert sorted(second.released_row_ids().tolist()) == sorted(held)
    outside = np.setdiff1d(order, second.source_row_ids)[:1]
    with pytest.raises(ValueError, match="probed cells"):
        second.positions_of(outside)
    light = cross_release.evaluate_light(target, SECRETS, apps, tmp_path / "light", 100)
    assert not any((tmp_path / "light").iterdir())  # its part of the source and its stage are gone
    full = cross_release.evaluate(target, cross_release.make_second_release(target, SECRETS, apps), sample_size=300,
                                  alias_sample_size=60).figures()
    figures = light.figures()
    assert figures["cross_release_strength"] == "light" and full["cross_release_strength"] == "full"
    assert figures["cross_release_n"] == 100 and light.metadata()["second_release"].startswith("light")
    assert abs(figures["cross_release_relinked_risk"] - full["cross_release_relinked_risk"]) < 0.15
    if config_id.startswith("c16"):
        assert figures["cross_release_relinked"] > 0.9 and figures["cross_release_aliases_relinked"] > 0.9
