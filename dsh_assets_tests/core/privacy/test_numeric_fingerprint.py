"""Numeric fingerprint on hand-built tables (answers worked out in the comments), a brute-force
cross-check of the band join, a small synthetic source, and the shared statistics (stats.py)."""

import dataclasses
import datetime as dt
import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from dsh_assets.core.files import DigestBook
from dsh_assets.core.privacy import numeric_fingerprint as fingerprint
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.privacy.stats import SampledRate, risk
from dsh_assets.core.statistics import wilson_interval
from dsh_assets.core.release.configs import load_configs
from dsh_assets.core.release.schema import load_schema
from dsh_assets.core.secrets import Secrets
from dsh_assets.core.release.source import ingest_source
from dsh_assets.core.release.synth import synthesize
from dsh_assets.core.release.transform import release
from dsh_assets_tests.tables import RELEASE_PERIOD, plain, row, s, under_test

SCHEMA = load_schema()
CONFIGS = load_configs(schema=SCHEMA)
SECRETS = Secrets(b"demo", b"demo", "demo")
ID_REMOVAL = CONFIGS["id_removal"]
C15 = CONFIGS["c15_window_k5_noise5"]
FIGURES = {"fingerprint_unique", "fingerprint_unique_ci", "fingerprint_correct", "fingerprint_correct_ci",
           "fingerprint_correct_baseline", "fingerprint_correct_risk", "fingerprint_n"}





def two_cells() -> list[dict]:
    """Ten rows, Uusimaa Gaming 5G station 101; every measurement of a row equals its value.

    X (minute 0):  10, 10.05, 10.2, 37.5, 80
    Y (minute 10): 50, 60, 70, 90, 100
    10 and 10.05 are within 1% of each other (2 candidates each); 10.2 is not within 1% of 10.05
    (10.05 * 1.01 = 10.1505) nor 10.05 of 10.2 (10.2 * 0.99 = 10.098): every other row is alone.
    No value of one cell is within 1% of a value of the other, so no control record can match.
    """
    x = [row(s(i + 1), 0, value=v) for i, v in enumerate((10.0, 10.05, 10.2, 37.5, 80.0))]
    y = [row(s(i + 6), 10, value=v) for i, v in enumerate((50.0, 60.0, 70.0, 90.0, 100.0))]
    return x + y


@pytest.fixture(scope="module")
def plain_two_cells(tmp_path_factory) -> ReleaseUnderTest:
    return under_test(tmp_path_factory.mktemp("two_cells"), two_cells(), ID_REMOVAL)


def test_unique_measurements_are_found_uniquely_and_correctly_without_noise(plain_two_cells):
    result = fingerprint.evaluate(plain_two_cells, sample_size=100)
    figures = result.figures()
    assert set(figures) == FIGURES
    # All ten rows are targets (sample 100 > 10 rows). 8 of 10 alone and found; controls never match.
    assert figures["fingerprint_n"] == 10
    assert figures["fingerprint_unique"] == figures["fingerprint_correct"] == 0.8
    assert figures["fingerprint_correct_baseline"] == 0.0 and figures["fingerprint_correct_risk"] == 0.8
    assert figures["fingerprint_correct_ci"] == list(wilson_interval(8, 10))
    metadata = result.metadata()
    assert metadata["control_n"] == 10 and metadata["control_fallbacks"] == 0 and "warning" not in metadata


def test_noise_mostly_beyond_one_percent_defeats_the_attack(tmp_path):
    attacked = under_test(tmp_path, two_cells(), C15)  # both cells have 5 rows: all kept, station dropped
    raw = np.array([r[SCHEMA.download] for r in two_cells()])
    noisy = np.array(pq.read_table(attacked.released_path).column(SCHEMA.download).to_pylist())
    # exp(Laplace(0, 0.05)) lands within +-1% with probability 1 - exp(-0.00995 / 0.05), about 18%.
    assert np.mean(np.abs(noisy / raw - 1) <= 0.01) < 0.5
    # A target needs all 14 measurements within 1%: about 0.18 ** 14, so nothing is found.
    figures = fingerprint.evaluate(attacked, sample_size=100).figures()
    assert figures["fingerprint_unique"] == figures["fingerprint_correct"] == 0.0
    assert figures["fingerprint_correct_risk"] == 0.0


def test_a_withheld_row_cannot_be_found(tmp_path):
    # k = 2 without noise: X and Y kept; a lone IM row in Lappi (its own cell) is withheld. It comes
    # first, so every released row sits one place before its source row: "correct" must follow that.
    rows = [row(s(11), 20, "Lappi", "IM", "3G", 301, value=5.0)] + two_cells()
    result = fingerprint.evaluate(under_test(tmp_path, rows, dataclasses.replace(ID_REMOVAL, k=2)), sample_size=100)
    figures = result.figures()
    assert figures["fingerprint_n"] == 11 and result.metadata()["targets_withheld"] == 1
    assert figures["fingerprint_unique"] == figures["fingerprint_correct"] == 8 / 11
    # The withheld row's control has no other IM/3G row to borrow from: a row of another cell is used.
    assert result.metadata()["control_fallbacks"] == 1


def test_null_matches_null_and_dropped_measurements_are_not_used(tmp_path):
    # Two rows of one cell, equal except that b's download is missing: a null only matches a null,
    # so each row is its own only candidate.
    rows = [row(s(1), 0, value=10.0), row(s(2), 0, value=10.0, **{SCHEMA.download: None}),
            row(s(3), 10, value=55.0)]
    figures = fingerprint.evaluate(under_test(tmp_path, rows, ID_REMOVAL), sample_size=100).figures()
    assert figures["fingerprint_correct"] == 1.0
    # Drop the download column from the release: the two rows are now indistinguishable (2 of 3 lost).
    no_download = dataclasses.replace(ID_REMOVAL, drop_fields=("identifiers", SCHEMA.download))
    result = fingerprint.evaluate(under_test(tmp_path, rows, no_download, name="drop"), sample_size=100)
    assert result.figures()["fingerprint_correct"] == pytest.approx(1 / 3)
    assert SCHEMA.download not in result.metadata()["measurements_used"]


def test_baseline_as_good_as_the_attack_gives_zero_risk_and_a_warning(tmp_path):
    # Four rows, one per station, every measurement 10: each target is alone in its cell (found,
    # correct), but so is every control record (another station's identical measurements in the
    # target's cell): the measurements add nothing beyond the cell. Baseline 1, risk 0.
    rows = [row(s(n), 0, station=100 + n) for n in range(1, 5)]
    result = fingerprint.evaluate(under_test(tmp_path, rows, ID_REMOVAL), sample_size=100)
    figures = result.figures()
    assert figures["fingerprint_correct"] == 1.0 and figures["fingerprint_correct_baseline"] == 1.0
    assert figures["fingerprint_correct_risk"] == 0.0
    assert "baseline" in result.metadata()["warning"]


def test_fully_suppressed_release_finds_nothing(tmp_path):
    result = fingerprint.evaluate(under_test(tmp_path, two_cells(), dataclasses.replace(ID_REMOVAL, k=10**6)))
    figures = result.figures()
    assert figures["fingerprint_unique"] == figures["fingerprint_correct"] == figures["fingerprint_correct_risk"] == 0.0
    assert figures["fingerprint_n"] == 10 and result.metadata()["targets_withheld"] == 10


def test_metadata_is_plain_json_without_truth(plain_two_cells):
    result = fingerprint.evaluate(plain_two_cells, sample_size=100)
    metadata = result.metadata()
    assert plain(metadata) and plain(result.figures()) and json.loads(json.dumps(metadata)) == metadata
    assert set(FIGURES) <= set(metadata) and metadata["assumptions"] == fingerprint.ASSUMPTIONS
    assert not any(r[SCHEMA.subscriber] in json.dumps(metadata) for r in two_cells())


def test_band_join_agrees_with_brute_force(tmp_path):
    """Clusters of near-identical rows, with zeros and nulls: the band join's candidate counts must
    equal an all-pairs count. Within a cluster every measurement is jittered by +-0.3% (always
    within 1% of each other) except one, jittered by +-1.5%, which decides whether two rows match."""
    rng = np.random.default_rng(7)
    width = len(SCHEMA.measurements)
    rows, vectors, cells = [], [], []
    for i in range(240):
        cluster = i % 30
        centre = np.random.default_rng(cluster).lognormal(3.0, 2.0, width)
        vector = centre * (1 + rng.uniform(-0.003, 0.003, width))
        wide = rng.integers(width)
        vector[wide] = centre[wide] * (1 + rng.uniform(-0.015, 0.015))
        if cluster % 5 == 0:
            vector[6] = np.nan  # a missing measurement shared by the cluster: null matches null
        if cluster % 7 == 0:
            vector[3] = 0.0
        if rng.random() < 0.03:
            vector[rng.integers(width)] = np.nan  # a lone null: matches no non-null value
        vectors.append(vector)
        cells.append(cluster % 3)
        values = {m: (None if np.isnan(v) else float(v)) for m, v in zip(SCHEMA.measurements, vector)}
        rows.append(row(s(i % 90), 10 * (cluster % 3), **values))
    vectors, cells = np.array(vectors), np.array(cells)
    with np.errstate(invalid="ignore"):
        target, other = vectors[:, None, :], vectors[None, :, :]
        within = ((other >= target * 0.99) & (other <= target * 1.01)) | (np.isnan(target) & np.isnan(other))
    candidates = (within.all(axis=2) & (cells[:, None] == cells[None, :])).sum(axis=1)
    assert 20 < (candidates > 1).sum() < 220  # ambiguous and unique targets both occur
    figures = fingerprint.evaluate(under_test(tmp_path, rows, ID_REMOVAL), sample_size=1000).figures()
    assert figures["fingerprint_n"] == 240
    assert figures["fingerprint_unique"] == figures["fingerprint_correct"] == (candidates == 1).sum() / 240


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """A small synthetic source (20,000 rows, 4,000 subscribers), ingested and released two ways."""
    directory = tmp_path_factory.mktemp("synthetic")
    synthesize(directory / "raw.parquet", rows=20_000, subscribers=4_000, period=dt.date(2026, 11, 20))
    summary = ingest_source(directory / "raw.parquet", directory / "source.parquet", SCHEMA, book=DigestBook())
    releases = {}
    for config in (ID_REMOVAL, C15):
        released = directory / f"{config.id}.parquet"
        plan = release(directory / "source.parquet", released, config, SCHEMA, SECRETS, summary.apps,
                       period=RELEASE_PERIOD, book=DigestBook())
        releases[config.id] = ReleaseUnderTest(directory / "source.parquet", released, config, SCHEMA, plan,
                                               book=DigestBook())
    return releases


def test_unprotected_release_is_fingerprinted_and_c15_is_not(synthetic):
    unprotected = fingerprint.evaluate(synthetic["id_removal"]).figures()
    assert unprotected["fingerprint_n"] == 1500
    assert unprotected["fingerprint_correct"] > 0.95 and unprotected["fingerprint_correct_risk"] > 0.95
    assert unprotected["fingerprint_correct_baseline"] < 0.01
    protected = fingerprint.evaluate(synthetic["c15_window_k5_noise5"]).figures()
    assert protected["fingerprint_correct"] < 0.01 and protected["fingerprint_correct_risk"] < 0.01


def test_fixed_seed_gives_the_same_figures_and_another_seed_another_sample(synthetic):
    attacked = synthetic["c15_window_k5_noise5"]  # some rows withheld: the sample decides how many
    first = fingerprint.evaluate(attacked, sample_size=500, sample_seed=11)
    again = fingerprint.evaluate(attacked, sample_size=500, sample_seed=11)
    other = fingerprint.evaluate(attacked, sample_size=500, sample_seed=12)
    assert first == again and first.metadata() == again.metadata()
    targets = fingerprint.draw_targets(20_000, 500, 11)
    assert np.array_equal(targets, fingerprint.draw_targets(20_000, 500, 11))
    assert len(np.intersect1d(targets, fingerprint.draw_targets(20_000, 500, 12))) < 100  # about 12 expected
    assert other.metadata()["sample_seed"] == 12
    assert abs(first.figures()["fingerprint_correct"] - other.figures()["fingerprint_correct"]) < 0.05


def test_risk_and_sampled_rate():
    assert risk(0.5, 0.0) == 0.5 and risk(0.2, 0.6) == 0.0 and risk(1.0, 1.0) == 0.0
    assert risk(0.6, 0.2) == pytest.approx(0.5)
    rate = SampledRate(successes=60, trials=100, baseline_successes=20, baseline_trials=100)
    assert rate.risk == pytest.approx(0.5) and not rate.baseline_as_good_as_attack
    assert SampledRate(1, 100, 1, 100).baseline_as_good_as_attack
