"""Pair evidence on hand-built tables (answers worked out in the comments): rows of B relinked to A, the
chance baseline, the combined table's singling out, and figures that do not depend on row order."""

import dataclasses
import json
import re

import numpy as np
import pyarrow.parquet as pq
import pytest

from dsh_assets.core.privacy import pairs, singling_out
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.publication import gate
from dsh_assets.core.release.configs import load_configs
from dsh_assets.core.release.schema import load_schema
from dsh_assets_tests.tables import plain, row, s, under_test

CONFIGS = load_configs()
# The shipped c15 and c17 without suppression (tiny tables have tiny cells) and, where said, without noise.
FINE = dataclasses.replace(CONFIGS["c15_window_k5_noise5"], k=0)
COARSE = dataclasses.replace(CONFIGS["c17_hour_groups_k5_noise10"], k=0)
FINE_EXACT, COARSE_EXACT = dataclasses.replace(FINE, noise_scale=0.0), dataclasses.replace(COARSE, noise_scale=0.0)


@dataclasses.dataclass(frozen=True)
class Reordered(ReleaseUnderTest):
    """A release whose file lists its rows in another order: position p holds the original's row ``order[p]``."""

    order: np.ndarray = None

    def released_row_ids(self) -> np.ndarray:
        return super().released_row_ids()[self.order]


def reordered(release: ReleaseUnderTest, seed: int, tmp_path) -> Reordered:
    order = np.random.default_rng(seed).permutation(len(release.released_row_ids()))
    path = tmp_path / f"{release.released_path.stem}.reordered{seed}.parquet"
    pq.write_table(pq.read_table(release.released_path).take(order), path)
    fields = {field.name: getattr(release, field.name) for field in dataclasses.fields(release)}
    return Reordered(**{**fields, "released_path": path}, order=order)


def six_rows() -> list[dict]:
    """Hour 8, 5G. Uusimaa: S1 Gaming 8:00, S2 Gaming 8:10, S3 Streaming 8:00 (all Media), S4 IM 8:20,
    S5 IM 8:30 (Messaging); Lappi: S6 Gaming 8:00. Every row has its own measurement vector."""
    return [row(s(1), 0, app="Gaming", value=1.0), row(s(2), 10, app="Gaming", value=2.0),
            row(s(3), 0, app="Streaming", value=3.0), row(s(4), 20, app="IM", value=4.0),
            row(s(5), 30, app="IM", value=5.0), row(s(6), 0, province="Lappi", app="Gaming", value=6.0)]


def pair_of(tmp_path, rows, config_a, config_b):
    return under_test(tmp_path, rows, config_a, name="a"), under_test(tmp_path, rows, config_b, name="b")


def test_identical_measurements_relink_perfectly_against_the_chance_baseline(tmp_path):
    a, b = pair_of(tmp_path, six_rows(), FINE_EXACT, COARSE_EXACT)
    figures = pairs.evaluate(a, b).figures()
    assert set(figures) == set(pairs.PAIR_FIGURES)
    # No noise: each row of B is at distance 0 from its own row of A and further from every other. B's cells
    # (hour, province, group, radio) hold 3, 2 and 1 rows, and the compatible rows of A (their windows and apps
    # coarsened to B's) are the same 3, 2 and 1: chance = (3 x 1/3 + 2 x 1/2 + 1) / 6 = 0.5; risk 1.
    assert figures["rows_relinked_n"] == 6
    assert figures["rows_relinked"] == 1.0
    assert figures["rows_relinked_baseline"] == pytest.approx(0.5)
    assert figures["rows_relinked_risk"] == pytest.approx(1.0)
    assert pairs.evaluate(a, b).comparisons == 3 * 3 + 2 * 2 + 1 * 1


def test_a_finer_a_and_a_coarser_b_combined_single_out_whom_b_alone_does_not(tmp_path):
    a, b = pair_of(tmp_path, six_rows(), FINE_EXACT, COARSE_EXACT)
    result = pairs.evaluate(a, b)
    # B alone: only S6 is alone in its cell (Lappi): 1 of 6, as the singling-out attack on B says.
    assert result.metadata()["singling_out_rate_b_alone"] == pytest.approx(1 / 6)
    assert singling_out.evaluate(b).figures()["singling_out_rate"] == pytest.approx(1 / 6)
    # With their twins' windows and apps from A, the Media rows (8:00 Gaming, 8:10 Gaming, 8:00 Streaming) and the
    # Messaging rows (8:20, 8:30) are each alone: 6 of 6.
    assert result.figures()["combined_singling_out_rate"] == 1.0
    assert result.metadata()["subscribers_singled_out_combined"] == 6


def test_a_row_of_b_whose_twin_a_withheld_is_still_linked_to_its_nearest_compatible_row(tmp_path):
    # Hour 8, 5G. Uusimaa: S1 Gaming 8:00 (1.0), S2 Gaming 8:00 (2.0), S3 Streaming 8:00 (3.0); Lappi: S4 Gaming 8:00.
    # A (windows, apps, k = 2) keeps S1 and S2 (one cell of two) and withholds S3 and S4 (cells of one). B (hours,
    # groups, no k) keeps all four. S3 of B has no twin in A: its pick is S2, the nearest of its compatible rows
    # S1 and S2, which share S1's and S2's picks (Gaming, the 8:00 window), so S1, S2 and S3 share one combined
    # cell. S4 has no compatible row in A and is alone, as in B alone: 1 of 4, not 2.
    rows = [row(s(1), 0, app="Gaming", value=1.0), row(s(2), 0, app="Gaming", value=2.0),
            row(s(3), 0, app="Streaming", value=3.0), row(s(4), 0, province="Lappi", app="Gaming", value=4.0)]
    a, b = pair_of(tmp_path, rows, dataclasses.replace(FINE_EXACT, k=2), COARSE_EXACT)
    assert len(a.released_row_ids()) == 2 and len(b.released_row_ids()) == 4
    result = pairs.evaluate(a, b)
    assert result.metadata()["subscribers_singled_out_b_alone"] == 1
    assert result.metadata()["subscribers_singled_out_combined"] == 1
    assert result.figures()["combined_singling_out_rate"] == pytest.approx(1 / 4)


def test_rows_of_a_that_the_attacker_cannot_tell_apart_give_the_chance_rate(tmp_path):
    # Four subscribers, one window, one app, the same measurements: the rows of A are equal in distance and in
    # quasi-identifiers, so the attacker picks one of four at random: expected success 1/4, the chance rate.
    rows = [row(s(i), 0, app="Gaming", value=7.0) for i in range(1, 5)]
    a, b = pair_of(tmp_path, rows, FINE_EXACT, COARSE_EXACT)
    result = pairs.evaluate(a, b)
    figures = result.figures()
    assert figures["rows_relinked"] == pytest.approx(0.25)
    assert figures["rows_relinked_baseline"] == pytest.approx(0.25)
    assert figures["rows_relinked_risk"] == 0.0
    assert result.warnings() and "as good as the attack" in result.metadata()["warning"]
    assert figures["combined_singling_out_rate"] == 0.0  # one cell of four, with or without the twins' fields


def varied_rows(n: int = 40) -> list[dict]:
    """``n`` rows over two hours, three apps, two provinces, with seeded random measurements."""
    rng = np.random.default_rng(7)
    apps, provinces = ("Gaming", "Streaming", "IM"), ("Uusimaa", "Lappi")
    return [row(s(i % 12), int(rng.integers(0, 12)) * 10, province=provinces[i % 2], app=apps[i % 3],
                value=float(rng.uniform(1, 1000))) for i in range(n)]


def test_figures_do_not_depend_on_the_order_of_either_files_rows(tmp_path):
    a, b = pair_of(tmp_path, varied_rows(), FINE, COARSE)
    first = pairs.evaluate(a, b, sample_size=15)
    assert first.figures()["rows_relinked_n"] == 15
    for seed in (1, 2, 3):
        again = pairs.evaluate(reordered(a, seed, tmp_path), reordered(b, seed + 10, tmp_path), sample_size=15)
        assert again.figures() == first.figures()
        assert again.metadata() == first.metadata()
    # Independent noise of scales 0.05 and 0.10 on 14 measurements mostly leaves a row nearest its own twin:
    # measured 14 of the 15 sampled rows, far above the chance of a random compatible row.
    figures = first.figures()
    assert figures["rows_relinked"] == pytest.approx(14 / 15)
    assert figures["rows_relinked_baseline"] < 0.3


def test_the_work_bound_leaves_the_combined_rate_unmeasured_and_the_gate_refuses_it(tmp_path):
    a, b = pair_of(tmp_path, six_rows(), FINE_EXACT, COARSE_EXACT)
    result = pairs.evaluate(a, b, max_comparisons=10)  # relinking every row of B compares 14 pairs
    assert result.figures()["combined_singling_out_rate"] is None
    assert "14 pairs of rows, over the bound of 10" in result.metadata()["combined_note"]
    policy = gate.load_publication()
    verdict, refused = gate.check_pair(policy, result.figures())
    assert refused == ["rows_relinked_upper 1 > max 0.05", "combined_singling_out_rate not measured (needs max 0.001)"]
    assert verdict["rows_relinked_upper"]["value"] == 1.0


def test_a_pair_of_releases_of_different_sources_is_refused(tmp_path):
    a = under_test(tmp_path, six_rows(), FINE_EXACT, name="a")
    b = under_test(tmp_path, six_rows()[:5], COARSE_EXACT, name="b")
    with pytest.raises(ValueError, match="different sources"):
        pairs.evaluate(a, b)


def test_metadata_is_plain_and_carries_no_truth(tmp_path):
    a, b = pair_of(tmp_path, varied_rows(), FINE, COARSE)
    metadata = pairs.evaluate(a, b, sample_size=10).metadata()
    assert plain(metadata) and metadata["assumptions"] == pairs.ASSUMPTIONS
    assert metadata["sample_size"] == 10 and metadata["sample_seed"] == pairs.DEFAULT_SAMPLE_SEED
    text = json.dumps(metadata)
    assert not re.search(r"3584\d{8}", text)  # no subscriber number
    assert "row_id" not in text and "__true" not in text


def brute_force_rows_relinked(a: ReleaseUnderTest, b: ReleaseUnderTest) -> tuple[float, float]:
    """(expected successes, chance) over every row of B, read from the definition: compatible rows of A (for two
    releases of one configuration, the same released quasi-identifiers), the nearest in log space with nulls
    skipped, 1/m over the m rows of A tied at the smallest distance (they share every quasi-identifier)."""
    frame_a, frame_b = pq.read_table(a.released_path).to_pandas(), pq.read_table(b.released_path).to_pandas()
    qis, measurements = list(a.config.released_qis(a.schema)), list(a.schema.measurements)
    logs_a = np.log(frame_a[measurements].to_numpy(dtype=float) + 1e-6)
    logs_b = np.log(frame_b[measurements].to_numpy(dtype=float) + 1e-6)
    twin_of = {row_id: position for position, row_id in enumerate(a.released_row_ids())}
    successes = chance = 0.0
    for position, row_id in enumerate(b.released_row_ids()):
        compatible = np.flatnonzero((frame_a[qis] == frame_b[qis].iloc[position]).all(axis=1).to_numpy())
        if len(compatible) == 0:
            continue
        distances = np.nansum(np.abs(logs_a[compatible] - logs_b[position]), axis=1)
        nearest = compatible[distances == distances.min()]
        successes += (twin_of.get(row_id) in nearest) / len(nearest)
        chance += 1 / len(compatible)
    return successes, chance


NULL_SHARE = 0.1


def test_rows_relinked_match_a_brute_force_reading_of_the_definition(tmp_path):
    # One cell of 60 rows, strong noise and some measurements null: the twin is often not the
    # nearest row, and the rows nearer than it have nulls where the twin has values (the bound that spares the
    # full distance to most rows must count those rows in, not leave them out).
    rng = np.random.default_rng(11)
    rows = [row(s(i % 30), int(rng.integers(0, 10)), app="Gaming",
                **{name: None if rng.random() < NULL_SHARE else float(rng.uniform(10, 20))
                   for name in load_schema().measurements})
            for i in range(60)]
    noisy_a = dataclasses.replace(FINE, id="pair_test_a", noise_scale=0.1)
    noisy_b = dataclasses.replace(FINE, id="pair_test_b", noise_scale=0.1)
    a, b = pair_of(tmp_path, rows, noisy_a, noisy_b)
    successes, chance = brute_force_rows_relinked(a, b)
    assert 0.2 < successes / 60 < 0.9  # the twin is nearest for some rows of B, not for all
    figures = pairs.evaluate(a, b, sample_size=1000).figures()
    assert figures["rows_relinked_n"] == 60
    assert figures["rows_relinked"] == pytest.approx(successes / 60, abs=1e-12)
    assert figures["rows_relinked_baseline"] == pytest.approx(chance / 60, abs=1e-12)


def test_nothing_published_means_no_pair_and_nothing_probed(tmp_path, monkeypatch):
    a, b = pair_of(tmp_path, varied_rows(), FINE, COARSE)

    def probe(*_):
        raise AssertionError("a candidate was probed with nothing to hold it against")

    monkeypatch.setattr(pairs.ProbedRelease, "of", probe)
    assert pairs.evaluate_pairs({"fine": a, "coarse": b}, against=[]) == {}
    assert pairs.evaluate_pairs({"fine": a}, against=["fine"]) == {}  # a published candidate is not its own pair


def test_each_candidate_is_held_only_against_the_published_ones_with_each_pairs_own_figures(tmp_path):
    a, b = pair_of(tmp_path, varied_rows(), FINE, COARSE)
    held = pairs.evaluate_pairs({"fine": a, "coarse": b}, against=["fine"], sample_size=15)
    assert list(held) == ["coarse"] and list(held["coarse"]) == ["fine"]  # B = coarse relinked to A = fine
    assert held["coarse"]["fine"].figures() == pairs.evaluate(a, b, sample_size=15).figures()
    with pytest.raises(ValueError, match="another release"):
        pairs.evaluate(a, b, sample_size=15, probed=pairs.ProbedRelease.of(a, 15, pairs.DEFAULT_SAMPLE_SEED))
