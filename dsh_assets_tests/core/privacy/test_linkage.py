"""Single-record linkage and alias chaining on hand-built tables; each answer is worked out in the comments.

Targets are drawn from the subscribers of the source (500 by default); on these tables that is every
subscriber (every one with three rows or more for alias chaining), so the rates are exact fractions.
"""

import dataclasses
import datetime as dt
import json
import re

import pytest

from dsh_assets.core.files import DigestBook
from dsh_assets.core.privacy import linkage
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.release.configs import load_configs
from dsh_assets.core.release.schema import load_schema
from dsh_assets.core.secrets import Secrets
from dsh_assets.core.release.source import ingest_source
from dsh_assets.core.release.synth import synthesize
from dsh_assets.core.release.transform import release
from dsh_assets_tests.tables import RELEASE_PERIOD, row, write

SCHEMA = load_schema()
CONFIGS = load_configs(schema=SCHEMA)
SECRETS = Secrets(b"linkage-seed", b"linkage-key", "test")
ALIAS_NO_PROTECTION = dataclasses.replace(CONFIGS["c16_window_k5_noise5_key"], k=0, noise_scale=0.0)
FIGURE_KEYS = {
    "linkage_unique", "linkage_unique_ci", "linkage_correct", "linkage_correct_ci", "linkage_correct_baseline",
    "linkage_correct_risk", "linkage_n", "alias_chain_correct", "alias_chain_correct_ci",
    "alias_chain_correct_baseline", "alias_chain_correct_risk", "alias_chain_n",
}


def release_of(directory, rows, config, name="release") -> ReleaseUnderTest:
    raw = write(directory / f"{name}.raw.parquet", rows)
    source = directory / f"{name}.source.parquet"
    summary = ingest_source(raw, source, SCHEMA, book=DigestBook())
    out = directory / f"{name}.parquet"
    plan = release(source, out, config, SCHEMA, SECRETS, summary.apps, period=RELEASE_PERIOD, book=DigestBook())
    return ReleaseUnderTest(source, out, config, SCHEMA, plan, book=DigestBook())


def lonely_and_crowd() -> list[dict]:
    """L alone in (08:00, Lappi, IM); C1..C5 five alike in (08:10, Uusimaa, Gaming). One row per subscriber."""
    lonely = [row("358400000001", 0, province="Lappi", app="IM", radio="3G")]
    crowd = [row(f"35841000000{i}", 10, province="Uusimaa", app="Gaming", radio="5G", value=float(i))
             for i in range(1, 6)]
    return lonely + crowd


def test_one_matching_row_links_the_target_and_a_cell_of_five_does_not(tmp_path):
    result = linkage.evaluate(release_of(tmp_path, lonely_and_crowd(), CONFIGS["id_removal"]))
    figures = result.figures()
    # Six targets (every subscriber), one observation each (their only row):
    #   L  -> released rows at (08:00, Lappi, IM): 1, and it is L's   -> unique and correct
    #   Ci -> released rows at (08:10, Uusimaa, Gaming): 5             -> not unique
    # linkage_unique = linkage_correct = 1/6.
    assert figures["linkage_n"] == 6
    assert figures["linkage_unique"] == pytest.approx(1 / 6)
    assert figures["linkage_correct"] == pytest.approx(1 / 6)
    # Control observations recombine a window (08:00 or 08:10) with a (province, app) of the table; only
    # (08:00, Lappi, IM) has one candidate, L's row, which counts only when the target is L: 0 or 1 of 6.
    assert figures["linkage_correct_baseline"] in (0.0, pytest.approx(1 / 6))
    assert figures["alias_chain_correct"] is None and figures["alias_chain_n"] == 0
    assert set(figures) == FIGURE_KEYS


def test_a_withheld_target_cannot_be_linked(tmp_path):
    target = release_of(tmp_path, lonely_and_crowd(), CONFIGS["c15_window_k5_noise5"])
    # k = 5: L's cell (08:00, Lappi, IM, 3G) has 1 row and is withheld; the crowd's cell has 5 rows and is kept.
    assert target.keep.sum() == 5 and len(target.keep) == 6
    figures = linkage.evaluate(target).figures()
    # L: no released row matches its observation; Ci: still 5 candidates -> 0/6 linked, 0/6 unique.
    assert figures["linkage_correct"] == 0.0 and figures["linkage_unique"] == 0.0 and figures["linkage_n"] == 6


def test_the_observation_is_coarsened_as_the_release_coarsens(tmp_path):
    # Hour windows and app groups, nothing withheld, no noise.
    config = dataclasses.replace(CONFIGS["c17_hour_groups_k5_noise10"], k=0, noise_scale=0.0)
    rows = [row("358400000001", 30, province="Lappi", app="Chat")]  # L: 08:30, Chat
    rows += [row(f"35841000000{i}", minute, app=app) for i, (minute, app) in
             enumerate(((0, "Gaming"), (10, "Streaming"), (50, "Music")), start=1)]
    result = linkage.evaluate(release_of(tmp_path, rows, config))
    # L's observation (08:30, Lappi, Chat) becomes (08:00, Lappi, Messaging): 1 released row, L's -> linked.
    # The others' raw observations all differ, but all become (08:00, Uusimaa, Media): 3 candidates each.
    # linkage_correct = 1/4.
    assert result.figures()["linkage_correct"] == pytest.approx(1 / 4)
    assert result.known_columns == ("time_start", "province", "application_category")


def three_observation_rows(with_twin: bool) -> list[dict]:
    """T has three rows; A, B and C each share two of them; D (optional) shares all three."""
    at = {"G": (0, "Uusimaa", "Gaming"), "I": (10, "Pirkanmaa", "IM"), "M": (20, "Lappi", "Music")}

    def rows_of(subscriber, keys, value):
        return [row(subscriber, at[k][0], province=at[k][1], app=at[k][2], value=value) for k in keys]

    rows = rows_of("358420000001", "GIM", 1.0)    # T
    rows += rows_of("358420000002", "GI", 2.0)    # A
    rows += rows_of("358420000003", "IM", 3.0)    # B
    rows += rows_of("358420000004", "GM", 4.0)    # C
    if with_twin:
        rows += rows_of("358420000005", "GIM", 5.0)  # D
    return rows


def test_alias_chain_that_narrows_to_one_alias_links_the_target(tmp_path):
    result = linkage.evaluate(release_of(tmp_path, three_observation_rows(with_twin=False), ALIAS_NO_PROTECTION))
    figures, metadata = result.figures(), result.metadata()
    # Only T has three rows, so T is the only chain target and its observations are its three rows:
    #   aliases at G = {T, A, C}, at I = {T, A, B}, at M = {T, B, C};  intersection = {T}  -> correct.
    assert figures["alias_chain_n"] == 1
    assert figures["alias_chain_correct"] == 1.0
    assert metadata["alias_chain_unique"] == 1.0
    # Single-record linkage: every observation has 3 candidate rows -> nobody is linked.
    assert figures["linkage_unique"] == 0.0 and figures["linkage_n"] == 4


def test_alias_chain_that_leaves_two_aliases_fails(tmp_path):
    result = linkage.evaluate(release_of(tmp_path, three_observation_rows(with_twin=True), ALIAS_NO_PROTECTION))
    figures, metadata = result.figures(), result.metadata()
    # T and D both have three rows (two targets). For either, G = {T, A, C, D}, I = {T, A, B, D},
    # M = {T, B, C, D}; intersection = {T, D}: two aliases left -> neither unique nor correct: 0/2.
    assert figures["alias_chain_n"] == 2
    assert figures["alias_chain_correct"] == 0.0
    assert metadata["alias_chain_unique"] == 0.0


def test_full_suppression_finds_nothing_and_raises_nothing(tmp_path):
    suppressed = dataclasses.replace(ALIAS_NO_PROTECTION, k=10**6)
    target = release_of(tmp_path, three_observation_rows(with_twin=False), suppressed)
    assert not target.keep.any()
    figures = linkage.evaluate(target).figures()
    # No released row: every observation has 0 candidates and no alias survives.
    assert figures["linkage_correct"] == 0.0 and figures["linkage_unique"] == 0.0 and figures["linkage_n"] == 4
    assert figures["alias_chain_correct"] == 0.0 and figures["alias_chain_n"] == 1
    assert figures["alias_chain_correct_risk"] == 0.0
    # Nothing found and nothing above the control: the anonymeter-style warning says so.
    assert "as good as the attack" in linkage.evaluate(target).metadata()["warning"]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """The real generator at a small size: 20,000 rows, 4,000 subscribers."""
    directory = tmp_path_factory.mktemp("linkage_synthetic")
    synthesize(directory / "raw.parquet", rows=20_000, subscribers=4_000, period=dt.date(2026, 11, 20))
    summary = ingest_source(directory / "raw.parquet", directory / "source.parquet", SCHEMA, book=DigestBook())

    def make(config_id: str) -> ReleaseUnderTest:
        config = CONFIGS[config_id]
        out = directory / f"{config_id}.parquet"
        plan = release(directory / "source.parquet", out, config, SCHEMA, SECRETS, summary.apps, period=RELEASE_PERIOD,
                       book=DigestBook())
        return ReleaseUnderTest(directory / "source.parquet", out, config, SCHEMA, plan, book=DigestBook())

    return make


def test_fixed_seeds_give_the_same_figures_twice_and_metadata_carries_no_truth(synthetic):
    target = synthetic("c16_window_k5_noise5_key")
    first, second = linkage.evaluate(target), linkage.evaluate(target)
    assert first.figures() == second.figures()
    figures = first.figures()
    # An alias makes three observations enough for many subscribers, far above the control.
    assert figures["alias_chain_n"] == 500
    assert figures["alias_chain_correct"] > figures["alias_chain_correct_baseline"] + 0.1
    assert figures["alias_chain_correct_risk"] > 0.1
    # k = 5 on (window, province, app, radio) leaves at least 5 candidates per observation.
    assert figures["linkage_unique"] == 0.0
    metadata = first.metadata()
    text = json.dumps(metadata)  # plain values only
    assert not re.search(r"s_[0-9a-f]{20}", text)  # no alias
    assert not re.search(r"3584\d{8}", text)  # no subscriber number
    assert metadata["assumptions"] == linkage.ASSUMPTIONS
