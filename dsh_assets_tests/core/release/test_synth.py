"""The synthetic source: shape, determinism, a stable population, and the planted effects that
the pipeline's tests rely on finding in the base data."""

from __future__ import annotations

import datetime as dt
import re
from importlib import resources

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dsh_assets.core.release import synth
from dsh_assets.core.release.schema import load_schema
from dsh_assets_tests.tables import sha256_file

PERIOD = dt.date(2026, 11, 1)
SCHEMA = load_schema(resources.files("dsh_assets").joinpath("columns.toml"))  # not $DSH_COLUMNS
SMALL = dict(rows=20_000, subscribers=4_000, period=PERIOD, schema=SCHEMA)
MODERATE = dict(rows=200_000, subscribers=36_000, period=PERIOD, schema=SCHEMA)


def query(table: pa.Table, sql: str) -> list[tuple]:
    con = duckdb.connect()
    con.register("t", table)
    return con.execute(sql).fetchall()


@pytest.fixture(scope="module")
def small() -> pa.Table:
    return synth.synth_table(**SMALL)


@pytest.fixture(scope="module")
def moderate() -> pa.Table:
    return synth.synth_table(**MODERATE)


def test_exact_counts_and_schema(small):
    assert small.schema == SCHEMA.arrow_schema()
    assert small.num_rows == SMALL["rows"]
    [(subscribers, triples, imsis, imeis)] = query(small, """
        select count(distinct msisdn), count(distinct (msisdn, imsi, imei)),
               count(distinct imsi), count(distinct imei) from t""")
    assert subscribers == triples == imsis == imeis == SMALL["subscribers"]


def test_identifiers_look_like_finnish_subscribers(small):
    def luhn_ok(number: str) -> bool:
        digits = [int(d) for d in reversed(number)]
        return sum(d if i % 2 == 0 else sum(divmod(2 * d, 10)) for i, d in enumerate(digits)) % 10 == 0

    msisdns, imsis, imeis = (set(small[c].to_pylist()) for c in SCHEMA.identifiers)
    assert all(re.fullmatch(r"358[45]\d{8}", m) for m in msisdns)
    assert all(re.fullmatch(r"24405\d{10}", i) for i in imsis)
    assert all(re.fullmatch(r"\d{15}", i) and luhn_ok(i) for i in imeis)
    assert {m[:4] for m in msisdns} == {"3584", "3585"}  # scattered, not in subscriber order


def test_categories_and_windows(small):
    assert len(synth.APPS) == 25 and len(set(synth.APPS)) == 25
    assert len(synth.PROVINCES) == 19 and {"Uusimaa", "Pirkanmaa"} <= set(synth.PROVINCES)
    assert set(synth.SPARSE_5G_APPS) <= set(synth.APPS)
    assert set(pc.unique(small[SCHEMA.app]).to_pylist()) == set(synth.APPS)
    assert set(pc.unique(small[SCHEMA.province]).to_pylist()) == set(synth.PROVINCES)
    assert set(pc.unique(small[SCHEMA.radio]).to_pylist()) == {"2G", "3G", "4G", "5G"}
    start = dt.datetime(2026, 11, 1, 8, tzinfo=dt.timezone.utc)
    windows = {start + dt.timedelta(minutes=10 * i) for i in range(synth.WINDOWS)}
    assert set(pc.unique(small[SCHEMA.time]).to_pylist()) == windows and synth.WINDOWS == 6


def test_measurements_are_plausible(moderate):
    for name in SCHEMA.measurements:
        column = moderate[name]
        assert 0.004 <= column.null_count / len(column) <= 0.025, name
        assert not pc.any(pc.is_nan(column)).as_py(), name
        assert pc.min(column).as_py() >= 0, name
    for name in ("packet_loss_pct", "retransmission_pct"):
        assert pc.max(moderate[name]).as_py() <= 100
    assert pc.max(moderate["cqi"]).as_py() <= 15
    stalls = moderate["video_stall_count"].drop_null()
    assert pc.all(pc.equal(stalls, pc.floor(stalls))).as_py()


def test_shape_of_rows_subscribers_and_radio(moderate):
    [(few, heaviest)] = query(moderate, """
        with s as (select count(*) n from t group by msisdn)
        select avg((n <= 3)::int), max(n) from s""")
    assert few > 0.4 and heaviest >= 30  # many light users, a tail of heavy ones
    radio = dict(query(moderate, """
        select radio_access_type, count(*) / sum(count(*)) over () from t group by 1"""))
    assert radio["4G"] > 0.5 and 0.18 <= radio["5G"] <= 0.27
    assert 0.07 <= radio["3G"] <= 0.13 and 0.01 <= radio["2G"] <= 0.08


def test_same_arguments_same_bytes_whatever_the_chunking(tmp_path, monkeypatch):
    monkeypatch.setattr(synth, "_ROW_GROUP", 3_000)  # several row groups, re-cut across chunks
    synth.synthesize(tmp_path / "a.parquet", **SMALL)
    synth.synthesize(tmp_path / "b.parquet", **SMALL)
    synth.synthesize(tmp_path / "c.parquet", **SMALL, chunk_subscribers=1)
    synth.synthesize(tmp_path / "d.parquet", **SMALL, seed=synth.DEFAULT_SEED + 1)
    assert sha256_file(tmp_path / "a.parquet") == sha256_file(tmp_path / "b.parquet")
    assert sha256_file(tmp_path / "a.parquet") == sha256_file(tmp_path / "c.parquet")
    assert sha256_file(tmp_path / "a.parquet") != sha256_file(tmp_path / "d.parquet")
    assert pq.read_table(tmp_path / "a.parquet").equals(synth.synth_table(**SMALL))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.parquet", "b.parquet", "c.parquet", "d.parquet"]


def test_failed_write_leaves_no_file(tmp_path, monkeypatch):
    target = tmp_path / "source.parquet"
    target.write_bytes(b"previous")

    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(synth, "_to_table", broken)
    with pytest.raises(RuntimeError):
        synth.synthesize(target, **SMALL)
    assert [p.name for p in tmp_path.iterdir()] == ["source.parquet"]
    assert target.read_bytes() == b"previous"


@pytest.mark.parametrize("rows, subscribers, extra", [
    (10, 11, {}), (0, 0, {}), (5, 0, {}), (10.0, 5, {}), (10, 5, {"chunk_subscribers": 0}),
    (10, 5, {"seed": -1}),
])
def test_bad_arguments_raise(tmp_path, rows, subscribers, extra):
    with pytest.raises(ValueError):
        synth.synthesize(tmp_path / "x.parquet", rows=rows, subscribers=subscribers, period=PERIOD, **extra)
    assert not list(tmp_path.iterdir())


def test_bad_arguments_say_what_is_wrong():
    with pytest.raises(ValueError, match="rows >= subscribers >= 1"):
        synth.synth_table(rows=3, subscribers=4, period=PERIOD)


def test_population_is_stable_across_periods_and_sizes(small):
    def people(table):
        return set(zip(*(table[c].to_pylist() for c in SCHEMA.identifiers)))

    later = synth.synth_table(rows=25_000, subscribers=4_000, period=PERIOD + dt.timedelta(days=7),
                              schema=SCHEMA)
    fewer = synth.synth_table(rows=12_000, subscribers=3_000, period=PERIOD, schema=SCHEMA)
    assert people(later) == people(small)  # every subscriber has a row in every period
    assert people(fewer) < people(small)   # a subscriber's identity depends on its index only
    homes = query(small, "select msisdn, mode(province) from t group by 1")
    homes_later = query(later, "select msisdn, mode(province) from t group by 1")
    same_home = len(set(homes) & set(homes_later)) / len(homes)
    assert same_home > 0.7  # home province is a stable trait; activity is not
    first_rows = [table.select(SCHEMA.measurements).slice(0, 1000) for table in (small, later)]
    assert not first_rows[0].equals(first_rows[1])


def test_another_roles_file_renames_columns(tmp_path, small):
    text = resources.files("dsh_assets").joinpath("columns.toml").read_text()
    renames = {"msisdn": "subscriber_no", "enb_id": "cell_site", "application_category": "app",
               "dl_throughput_kbps": "down_kbps", "radio_latency_ms": "rtt_ms", "cqi": "channel_quality"}
    for old, new in renames.items():
        text = text.replace(f'"{old}"', f'"{new}"')
    (tmp_path / "roles.toml").write_text(text)
    other = load_schema(tmp_path / "roles.toml")
    table = synth.synth_table(**{**SMALL, "schema": other})
    assert table.schema == other.arrow_schema()
    assert table.rename_columns(list(SCHEMA.columns)).equals(small)


def test_planted_gaming_worse_than_streaming_on_5g(moderate):
    medians = dict(query(moderate, """
        select application_category, median(radio_latency_ms) from t
        where radio_access_type = '5G' and application_category in ('Gaming', 'Streaming') group by 1"""))
    assert 100 <= medians["Gaming"] <= 130 and 60 <= medians["Streaming"] <= 85  # deck: 114 vs 72
    assert medians["Gaming"] > 1.3 * medians["Streaming"]


def test_planted_slow_5g_downloads_vpn_and_im_first(moderate):
    shares = query(moderate, """
        with p as (select quantile_cont(dl_throughput_kbps, 0.1) p10 from t)
        select application_category, avg((dl_throughput_kbps <= p10)::int) s from t, p
        where radio_access_type = '5G' and dl_throughput_kbps is not null
        group by 1 order by s desc""")
    apps = [app for app, _ in shares]
    share = [s for _, s in shares]
    assert set(apps[:2]) == {"VPN", "IM"}
    assert share[1] - share[2] > 0.08  # by a clear margin
    assert set(apps[:6]) == {"VPN", "IM", "Cloud storage", "P2P", "Video conferencing", "Online education"}
    assert share[5] - share[6] > 0.02  # the top six stand apart from the rest


def test_planted_overloaded_stations(moderate):
    overloaded = synth.overloaded_stations()
    assert len(overloaded) == 5 and overloaded == synth.overloaded_stations(synth.DEFAULT_SEED)
    stations = query(moderate, """
        select enb_id, count(*), count(distinct msisdn),
               median(radio_latency_ms) filter (where radio_access_type = '4G') from t group by 1
        order by 2 desc""")
    rows = sorted(n for _, n, _, _ in stations)
    users = sorted(u for _, _, u, _ in stations)
    latency = sorted(lat for *_, lat in stations if lat is not None)
    median = lambda xs: xs[len(xs) // 2]  # noqa: E731
    assert {station for station, *_ in stations[:5]} == set(overloaded)  # the busiest five
    for _, n, u, lat in stations[:5]:
        assert n > 6 * median(rows) and u > 5 * median(users) and lat > 1.5 * median(latency)


def test_planted_sparse_5g_apps_stay_under_k(moderate):
    largest = dict(query(moderate, """
        select application_category, max(n) from (
            select application_category, count(*) n from t where radio_access_type = '5G'
            group by time_start, province, application_category)
        group by 1"""))
    assert all(largest.get(app, 0) < 5 for app in synth.SPARSE_5G_APPS)
    assert largest["Streaming"] >= 5


def test_default_size_privacy_baseline():
    """One test at the default size (a few seconds): the deck's baseline of 1 in 3 subscribers
    singled out once identifiers are removed, and k=5 suppression withholding few rows yet every
    sparse app x 5G cell."""
    table = synth.synth_table(rows=synth.DEFAULT_ROWS, subscribers=synth.DEFAULT_SUBSCRIBERS,
                              period=PERIOD, schema=SCHEMA)
    [(singled_out,)] = query(table, """
        with c as (select count(*) n, any_value(msisdn) m from t
                   group by time_start, province, application_category, radio_access_type, enb_id)
        select (select count(distinct m) from c where n = 1) / (select count(distinct msisdn) from t)""")
    assert 0.28 <= singled_out <= 0.40
    [(withheld,)] = query(table, """
        with c as (select count(*) n from t
                   group by time_start, province, application_category, radio_access_type)
        select sum(n) filter (where n < 5) / sum(n) from c""")
    assert withheld < 0.01
    sparse = {app: (total, largest) for app, total, largest in query(table, """
        select application_category, sum(n), max(n) from (
            select application_category, count(*) n from t where radio_access_type = '5G'
            group by time_start, province, application_category)
        group by 1""")}
    for app in synth.SPARSE_5G_APPS:
        total, largest = sparse[app]
        assert 5 <= total <= 60 and largest < 5, app  # present, yet under k in every cell


def test_synthesize_creates_missing_folders(tmp_path):
    path = tmp_path / "not" / "yet" / "there.parquet"
    synth.synthesize(path, rows=50, subscribers=10, period=dt.date(2026, 11, 20))
    assert pq.read_metadata(path).num_rows == 50
    assert [p.name for p in path.parent.iterdir()] == ["there.parquet"]  # no temporary file left
