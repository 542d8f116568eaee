"""DP count release: configuration, contribution bounding, and the once-per-period protocol."""

import datetime as dt
import hashlib
import multiprocessing
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow.parquet as pq
import pytest

from dsh_assets.core import files
from dsh_assets.core.dp import mechanism
from dsh_assets.core.dp import publish as dp
from dsh_assets.core.dp.publish import EmbeddedCounting
from dsh_assets.core.files import DigestBook
from dsh_assets.core.release import configs
from dsh_assets.core.dp.ledger import BudgetExceeded, Ledger
from dsh_assets.core.release.configs import ConfigError
from dsh_assets.core.release.schema import load_schema
from dsh_assets.core.secrets import Secrets
from dsh_assets_tests.tables import T0, row, write

PERIOD = "2026-11-20"
NOW = dt.datetime(2026, 11, 21, 0, 15, tzinfo=dt.timezone.utc)
SECRETS = Secrets(b"test-seed", b"test-key", "test")
APPS = ("Gaming", "Streaming", "IM", "VPN", "Music", "Email", "Maps", "News", "Banking", "Chat")
HEAVY, LIGHT = "358400000001", "358400000002"
EXACT = 1e4
"""An epsilon so large that the noise is 0 with probability 1 - 1e-1000: shows the true counts."""


def config(epsilon=1.0, bound=4, threshold=None, config_id="dp_test", **extra) -> configs.DpCountsConfig:
    fields = {"epsilon": epsilon, "max_cells_per_subscriber": bound, **extra}
    if threshold is not None:
        fields["threshold"] = threshold
    return configs.parse_dp_config(config_id, fields)


@pytest.fixture
def source(tmp_path):
    """HEAVY in 10 cells of Uusimaa (a second row in three of them); LIGHT in 2 cells of Pirkanmaa."""
    rows = [row(HEAVY, app=app) for app in APPS] + [row(HEAVY, app=app) for app in APPS[:3]]
    rows += [row(LIGHT, province="Pirkanmaa", app=app) for app in APPS[:2]]
    return write(tmp_path / "source.parquet", rows)


def counts_by_cell(cell_counts: dp.CellCounts) -> dict[tuple, int]:
    schema = load_schema()
    cells = cell_counts.cells
    keys = zip(cells.column(schema.province).to_pylist(), cells.column(schema.app).to_pylist())
    return dict(zip(keys, cell_counts.counts.tolist()))


# -- configuration ----------------------------------------------------------------------------

def test_parse_dp_config_reads_the_releases_file_table():
    parsed = configs.parse_dp_config("dp_counts_eps1", {
        "kind": "dp_counts", "description": "counts", "epsilon": 1.0, "max_cells_per_subscriber": 4, "threshold": 0})
    assert (parsed.epsilon, parsed.sensitivity, parsed.threshold, parsed.time_coarsen) == (1.0, 4, 0, "window")
    assert parsed.ledger_debits() == {"dp_counts_eps1": 1.0}
    split = config(slow_share_epsilon=0.25)
    assert split.ledger_debits() == {"dp_test": 0.75, "dp_test.slow_5g": 0.25}
    assert config(epsilon=1.0).definition_hash() != config(epsilon=0.5).definition_hash()
    assert config().definition_hash() == config().definition_hash()


@pytest.mark.parametrize("fields, message", [
    ({"epsilon": 0, "max_cells_per_subscriber": 4}, "epsilon must be > 0"),
    ({"epsilon": -1.0, "max_cells_per_subscriber": 4}, "epsilon must be > 0"),
    ({"epsilon": True, "max_cells_per_subscriber": 4}, "epsilon must be a finite number"),
    ({"epsilon": float("inf"), "max_cells_per_subscriber": 4}, "epsilon must be a finite number"),
    ({"max_cells_per_subscriber": 4}, "epsilon is required"),
    ({"epsilon": 1.0, "max_cells_per_subscriber": 0}, "max_cells_per_subscriber must be >= 1"),
    ({"epsilon": 1.0, "max_cells_per_subscriber": 2.5}, "max_cells_per_subscriber must be an integer"),
    ({"epsilon": 1.0, "max_cells_per_subscriber": 4, "threshold": -1}, "threshold must be >= 0"),
    ({"epsilon": 1.0, "max_cells_per_subscriber": 4, "time_coarsen": "day"}, "time_coarsen must be one of"),
    ({"epsilon": 1.0, "max_cells_per_subscriber": 4, "slow_share_epsilon": 1.0}, "slow_share_epsilon must be"),
    ({"epsilon": 1.0, "max_cells_per_subscriber": 4, "k": 5}, "unknown fields"),
    ({"kind": "release", "epsilon": 1.0, "max_cells_per_subscriber": 4}, "kind must be"),
])
def test_parse_dp_config_refuses_bad_values(fields, message):
    with pytest.raises(ConfigError, match=message):
        configs.parse_dp_config("dp_bad", fields)


# -- bounding and the domain ------------------------------------------------------------------

def test_a_subscriber_in_more_cells_than_the_bound_counts_in_exactly_bound_cells(source):
    counts = dp.bounded_cell_counts(source, config(bound=4), load_schema(), SECRETS, book=DigestBook())
    by_cell = counts_by_cell(counts)
    heavy_cells = [app for (province, app), n in by_cell.items() if province == "Uusimaa" and n]
    assert len(heavy_cells) == 4 and set(by_cell.values()) <= {0, 1}
    assert [by_cell[("Pirkanmaa", app)] for app in APPS[:2]] == [1, 1]  # under the bound: all kept
    assert counts.counts.sum() == 4 + 2  # L1 contribution of each subscriber <= bound
    doubled_and_dropped = len([app for app in APPS[:3] if app not in heavy_cells])
    assert counts.loss == {
        "subscribers": 2, "subscribers_over_bound": 1, "subscriber_cell_pairs": 12, "pairs_dropped_by_bound": 6,
        "rows": 15, "rows_dropped_by_bound": 6 + doubled_and_dropped,
        "share_of_rows_dropped": (6 + doubled_and_dropped) / 15, "pairs_outside_public_domain": 0}


def test_the_kept_cells_are_those_with_the_smallest_keyed_hash(source):
    counts = dp.bounded_cell_counts(source, config(bound=4), load_schema(), SECRETS, book=DigestBook())
    key = dp.bound_key(SECRETS)
    epoch_us = str(int(T0.timestamp()) * 1_000_000)

    def keyed(app):
        return hashlib.sha256("\x1f".join([key, HEAVY, epoch_us, "Uusimaa", app, "5G"]).encode()).hexdigest()

    expected = set(sorted(APPS, key=keyed)[:4])
    assert {app for (province, app), n in counts_by_cell(counts).items() if province == "Uusimaa" and n} == expected


def test_the_choice_does_not_depend_on_row_order_but_on_the_seed(tmp_path):
    rows = [row(HEAVY, app=app, minute=m) for app in APPS for m in (0, 10)]
    forward = write(tmp_path / "forward.parquet", rows)
    backward = write(tmp_path / "backward.parquet", rows[::-1])
    schema = load_schema()
    first = dp.bounded_cell_counts(forward, config(bound=3), schema, SECRETS, book=DigestBook())
    again = dp.bounded_cell_counts(backward, config(bound=3), schema, SECRETS, book=DigestBook())
    other = dp.bounded_cell_counts(forward, config(bound=3), schema, Secrets(b"another-seed", b"k", "test"),
                                   book=DigestBook())
    assert np.array_equal(first.counts, again.counts)
    assert first.counts.sum() == other.counts.sum() == 3
    assert not np.array_equal(first.counts, other.counts)


def test_the_bounding_is_remembered_while_the_file_and_its_inputs_are_unchanged(source, monkeypatch):
    monkeypatch.setattr(files, "SETTLED_NS", 0)  # the fixture's file is fresh: treat it as settled
    real, calls = dp._bound_ranked_cells, []
    monkeypatch.setattr(dp, "_bound_ranked_cells", lambda *args: calls.append(args[2:]) or real(*args))
    schema, book = load_schema(), DigestBook()
    first = dp.bounded_cell_counts(source, config(bound=4), schema, SECRETS, book)
    assert np.array_equal(dp.bounded_cell_counts(source, config(bound=4), schema, SECRETS, book).counts, first.counts)
    assert len(calls) == 1
    dp.bounded_cell_counts(source, config(bound=3), schema, SECRETS, book)
    dp.bounded_cell_counts(source, config(bound=4), schema, Secrets(b"another-seed", b"test-key", "test"), book)
    assert len(calls) == 3
    dp.bounded_cell_counts(source, config(bound=4), schema, SECRETS, DigestBook())  # another book: counted again
    assert len(calls) == 4
    write(source, [row(LIGHT, province="Pirkanmaa")])
    assert dp.bounded_cell_counts(source, config(bound=4), schema, SECRETS, book).counts.sum() == 1
    assert len(calls) == 5


def test_the_domain_is_the_full_cross_product_so_absent_cells_are_counted_too(source):
    counts = dp.bounded_cell_counts(source, config(), load_schema(), SECRETS, book=DigestBook())
    assert counts.cells.num_rows == len(counts.counts) == 1 * 2 * len(APPS) * 1  # times x provinces x apps x radios
    assert (counts.counts == 0).sum() == 20 - 6


def test_a_public_domain_adds_absent_categories_and_drops_cells_outside_it(source):
    schema = load_schema()
    domain = {"province": ["Uusimaa", "Pirkanmaa", "Lappi"], "radio": ["4G", "5G"], "time": [T0]}
    counts = dp.bounded_cell_counts(source, config(bound=20), schema, SECRETS, public_domain=domain, book=DigestBook())
    assert len(counts.counts) == 1 * 3 * len(APPS) * 2
    assert counts.counts.sum() == 12
    only_uusimaa = dp.bounded_cell_counts(source, config(bound=20), schema, SECRETS,
                                          public_domain={"province": ["Uusimaa"]}, book=DigestBook())
    assert only_uusimaa.counts.sum() == 10 and only_uusimaa.loss["pairs_outside_public_domain"] == 2


# -- publishing -------------------------------------------------------------------------------

@pytest.fixture
def ledger(tmp_path) -> Ledger:
    return Ledger(tmp_path / "home" / "budget.sqlite", period_cap=1.0, year_cap=30.0)


def out(tmp_path, name="dp_test"):
    return tmp_path / "home" / "released" / name / PERIOD / "released.parquet"


def publish(source, tmp_path, ledger, cfg=None, **kwargs):
    cfg = cfg or config()
    arguments = {"now": NOW, "counting": EmbeddedCounting(DigestBook()), "book": DigestBook(), **kwargs}
    return dp.publish_dp_counts(source, out(tmp_path, cfg.id), cfg, load_schema(), SECRETS, ledger, PERIOD,
                                **arguments)


def test_a_drawn_table_is_hashed_once_where_it_is_written(source, tmp_path, ledger, monkeypatch):
    """The publication step verifies the table against its recorded digest without reading it again."""
    hashed, book = [], files.DigestBook()
    real = files._read_sha256
    monkeypatch.setattr(files, "_read_sha256", lambda path: hashed.append(path) or real(path))
    outcome = publish(source, tmp_path, ledger, book=book)
    assert book.sha256(outcome.path) == outcome.sha256 == hashlib.sha256(outcome.path.read_bytes()).hexdigest()
    assert hashed == [outcome.path]


def test_published_counts_are_integers_at_least_zero_and_the_threshold_drops_small_ones(source, tmp_path, ledger):
    everything = publish(source, tmp_path, ledger, config(epsilon=0.1, config_id="dp_all"))
    table = pq.read_table(everything.path)
    assert table.column_names == [*load_schema().categorical_qis, dp.NOISY_COUNT]
    assert str(table.schema.field(dp.NOISY_COUNT).type) == "int64"
    noisy = table.column(dp.NOISY_COUNT).to_numpy()
    assert table.num_rows == 20 and noisy.min() >= 0 and (noisy == 0).any()  # clamped, not dropped
    ledger_big = Ledger(tmp_path / "big.sqlite", period_cap=10.0, year_cap=30.0)
    thresholded = publish(source, tmp_path, ledger_big, config(epsilon=0.1, threshold=3, config_id="dp_thr"))
    noisy = pq.read_table(thresholded.path).column(dp.NOISY_COUNT).to_numpy()
    assert noisy.min() >= 3 and len(noisy) < 20
    assert thresholded.metadata["cells"] == 20 and thresholded.metadata["cells_published"] == len(noisy)


def test_at_a_huge_epsilon_the_table_shows_the_bounded_true_counts(source, tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite", period_cap=EXACT, year_cap=EXACT)
    outcome = publish(source, tmp_path, ledger, config(epsilon=EXACT))
    truth = dp.bounded_cell_counts(source, config(epsilon=EXACT), load_schema(), SECRETS, book=DigestBook())
    assert pq.read_table(outcome.path).column(dp.NOISY_COUNT).to_numpy().tolist() == truth.counts.tolist()


def test_metadata_states_the_mechanism_and_the_file_carries_no_bounding_loss(source, tmp_path, ledger):
    outcome = publish(source, tmp_path, ledger)
    meta = outcome.metadata
    assert (meta["epsilon"], meta["sensitivity_l1"], meta["scale"], meta["cells"]) == (1.0, 4, 4.0, 20)
    assert meta["accuracy_95"] == mechanism.discrete_laplace_half_width(4.0) == 12
    assert outcome.bounding["pairs_dropped_by_bound"] == 6
    footer = dp.read_public_metadata(outcome.path)
    assert footer["epsilon"] == 1.0 and not any("dropped" in key for key in footer)
    assert "test-seed" not in outcome.path.read_bytes().decode("latin-1")
    flat = outcome.to_metadata()
    assert flat["dp_epsilon"] == 1.0 and flat["bounding_rows_dropped_by_bound"] >= 6 and flat["budget_left"] == 0.0


def test_a_published_period_is_returned_not_redrawn_and_republish_debits_again(source, tmp_path):
    ledger = Ledger(tmp_path / "budget.sqlite", period_cap=2.0, year_cap=30.0)
    first = publish(source, tmp_path, ledger)
    stored = first.path.read_bytes()
    again = publish(source, tmp_path, ledger)
    assert again.reused and again.epsilon_spent == 0.0 and again.reservation == first.reservation
    assert again.path.read_bytes() == stored and again.sha256 == first.sha256
    assert again.bounding == first.bounding and again.metadata["definition_matches"]
    assert ledger.status(PERIOD)["period_used"] == 1.0 and len(ledger.entries()) == 1
    fresh = publish(source, tmp_path, ledger, republish=True)
    assert not fresh.reused and fresh.epsilon_spent == 1.0 and fresh.path.read_bytes() != stored
    assert ledger.status(PERIOD)["period_used"] == 2.0
    with pytest.raises(BudgetExceeded):
        publish(source, tmp_path, ledger, republish=True)


def test_refusal_at_the_cap_writes_nothing(source, tmp_path):
    ledger = Ledger(tmp_path / "budget.sqlite", period_cap=0.5, year_cap=30.0)
    with pytest.raises(BudgetExceeded, match="renews 2026-11-21"):
        publish(source, tmp_path, ledger)
    released = tmp_path / "home" / "released"
    assert not out(tmp_path).exists() and not [p for p in released.rglob("*") if p.is_file()]
    assert ledger.entries() == []


def test_a_lost_file_is_not_a_free_draw(source, tmp_path, ledger):
    first = publish(source, tmp_path, ledger)
    first.path.unlink()
    with pytest.raises(BudgetExceeded):  # the period's budget is spent: no second draw for free
        publish(source, tmp_path, ledger)
    assert not first.path.exists()


def test_a_failed_draw_rolls_the_reservation_back_and_writes_nothing(source, tmp_path, ledger, monkeypatch):
    def broken(*args):
        raise RuntimeError("sampler failed")

    monkeypatch.setattr(dp, "noisy_counts_table", broken)
    with pytest.raises(RuntimeError, match="sampler failed"):
        publish(source, tmp_path, ledger)
    assert [e["status"] for e in ledger.entries()] == ["rolled_back"]
    assert not out(tmp_path).exists() and ledger.status(PERIOD)["period_used"] == 0.0


def _publish_in_process(source, home, barrier, results, config_id):
    ledger = Ledger(home / "budget.sqlite", period_cap=1.0, year_cap=30.0)
    cfg = config(config_id=config_id)
    path = home / "released" / config_id / PERIOD / "released.parquet"
    barrier.wait()
    try:
        dp.publish_dp_counts(source, path, cfg, load_schema(), SECRETS, ledger, PERIOD,
                             counting=EmbeddedCounting(DigestBook()), book=DigestBook())
        results.put((config_id, "won"))
    except BudgetExceeded:
        results.put((config_id, "refused"))


def test_two_processes_racing_for_the_last_of_the_cap_one_wins_one_writes_nothing(source, tmp_path):
    home = tmp_path / "home"
    Ledger(home / "budget.sqlite", period_cap=1.0, year_cap=30.0)
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(2), context.Queue()
    workers = [context.Process(target=_publish_in_process, args=(source, home, barrier, results, name))
               for name in ("dp_one", "dp_two")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    outcome = dict(results.get(timeout=5) for _ in workers)
    assert sorted(outcome.values()) == ["refused", "won"]
    for name, result in outcome.items():
        assert (home / "released" / name / PERIOD / "released.parquet").exists() == (result == "won")
    assert Ledger(home / "budget.sqlite", 1.0, 30.0).status(PERIOD)["period_used"] == 1.0


CRASHING_PUBLISH = textwrap.dedent("""
    import os, signal, sys
    from dsh_assets.core.dp import ledger as budget, publish as dp
    from dsh_assets.core.files import DigestBook
    from dsh_assets.core.release import configs
    from dsh_assets.core.release.schema import load_schema
    from dsh_assets.core.secrets import Secrets
    source, out_path, ledger_path, when = sys.argv[1:5]
    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)
    if when == "before_write":
        dp.noisy_counts_table = die
    else:
        budget.Ledger.complete = die  # the file is renamed into place, then the process dies
    config = configs.parse_dp_config("dp_test", {"epsilon": 1.0, "max_cells_per_subscriber": 4})
    dp.publish_dp_counts(source, out_path, config, load_schema(), Secrets(b"test-seed", b"test-key", "test"),
                         budget.Ledger(ledger_path, 1.0, 30.0), "2026-11-20",
                         counting=dp.EmbeddedCounting(DigestBook()), book=DigestBook())
""")


@pytest.mark.parametrize("when", ["before_write", "after_write"])
def test_a_publish_killed_between_reserve_and_complete_is_resolved_by_the_next_publish(source, tmp_path, ledger, when):
    done = subprocess.run([sys.executable, "-c", CRASHING_PUBLISH, source, str(out(tmp_path)), str(ledger.path), when],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert [e["status"] for e in ledger.entries()] == ["reserved"]
    assert out(tmp_path).exists() == (when == "after_write")
    written = out(tmp_path).read_bytes() if when == "after_write" else None
    outcome = publish(source, tmp_path, ledger)  # recover, then the protocol; the cap of 1.0 allows one table
    statuses = [e["status"] for e in ledger.entries()]
    if when == "before_write":
        assert statuses == ["rolled_back", "published"] and not outcome.reused
    else:
        assert statuses == ["published"] and outcome.reused and outcome.path.read_bytes() == written
    assert ledger.status(PERIOD)["period_used"] == 1.0


# -- Elina's Q2 -------------------------------------------------------------------------------

@pytest.fixture
def slow_source(tmp_path):
    download = load_schema().download
    rows = [
        row("358400000011", app="VPN", **{download: 100.0}),
        row("358400000012", app="VPN", **{download: 50_000.0}),
        row("358400000013", app="IM", **{download: 200.0}),
        row("358400000014", app="IM", **{download: 900.0}),
        row("358400000014", app="IM", **{download: 90_000.0}),
        row("358400000015", app="IM", **{download: 40_000.0}),
        row("358400000016", app="Gaming", radio="4G", **{download: 10.0}),  # not 5G
        row("358400000017", app="VPN", **{download: 70_000.0}),
        row("358400000017", app="IM", **{download: 70_000.0}),  # two apps: counts in one at bound 1
    ]
    return write(tmp_path / "slow.parquet", rows)


def test_slow_download_counts_per_app_with_the_bound(slow_source):
    counts = dp.slow_download_counts(slow_source, load_schema(), SECRETS, 1, 1000.0)
    assert counts.apps == ("Gaming", "IM", "VPN")
    assert counts.slow.tolist() == [0, 2, 1]
    assert counts.on_radio.tolist()[0] == 0 and sum(counts.on_radio) == 2 + 3 + 1  # subscriber 17 in one app
    assert counts.loss["pairs_dropped_by_bound"] == 1


def test_dp_slow_download_shares_at_a_huge_epsilon_are_the_true_shares(slow_source):
    shares = dp.dp_slow_download_shares(slow_source, load_schema(), SECRETS, EXACT, 2, 1000.0, min_subscribers=1)
    assert shares == {"Gaming": None, "IM": pytest.approx(2 / 4), "VPN": pytest.approx(1 / 3)}
    assert dp.top_apps(shares, 6) == ["IM", "VPN"]


def test_the_q2_table_is_its_own_debit_in_the_ledger(slow_source, tmp_path, ledger):
    cfg = config(slow_share_epsilon=0.25)
    schema = load_schema()
    dp.publish_dp_counts(slow_source, out(tmp_path), cfg, schema, SECRETS, ledger, PERIOD, now=NOW,
                         counting=EmbeddedCounting(DigestBook()), book=DigestBook())
    q2 = dp.publish_dp_slow_shares(slow_source, tmp_path / "q2.parquet", cfg, schema, SECRETS, ledger, PERIOD, now=NOW,
                                   counting=EmbeddedCounting(DigestBook()), book=DigestBook())
    assert q2.metadata["sensitivity_l1"] == 2 and q2.metadata["epsilon"] == 0.25
    assert {(e["config"], e["epsilon"]) for e in ledger.entries()} == {("dp_test", 0.75), ("dp_test.slow_5g", 0.25)}
    assert ledger.status(PERIOD)["period_used"] == 1.0
    assert dp.publish_dp_slow_shares(slow_source, tmp_path / "q2.parquet", cfg, schema, SECRETS, ledger, PERIOD,
                                     counting=EmbeddedCounting(DigestBook()), book=DigestBook()).reused
    with pytest.raises(ConfigError, match="no Q2 table"):
        dp.publish_dp_slow_shares(slow_source, tmp_path / "q2.parquet", config(), schema, SECRETS, ledger, PERIOD,
                                  counting=EmbeddedCounting(DigestBook()), book=DigestBook())


def test_hour_coarsening_merges_the_windows_of_an_hour(tmp_path):
    rows = [row(HEAVY, minute=0), row(HEAVY, minute=10), row(LIGHT, minute=70)]
    source = write(tmp_path / "hours.parquet", rows)
    schema = load_schema()
    windows = dp.bounded_cell_counts(source, config(bound=10), schema, SECRETS, book=DigestBook())
    hours = dp.bounded_cell_counts(source, config(bound=10, time_coarsen="hour"), schema, SECRETS, book=DigestBook())
    assert len(windows.counts) == 3 and windows.counts.tolist() == [1, 1, 1]
    assert len(hours.counts) == 2 and hours.counts.tolist() == [1, 1]  # HEAVY once in hour 8, LIGHT in hour 9
