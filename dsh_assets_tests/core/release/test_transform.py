import dataclasses
import datetime as dt
import hashlib
import hmac
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsh_assets.core import tables
from dsh_assets.core.files import DigestBook
from dsh_assets.core.release.configs import (
    ROW_RELEASE, ConfigError, load_configs, publishable_configs,
)
from dsh_assets.core.release.schema import load_schema
from dsh_assets.core.release.source import ingest_source
from dsh_assets.core.release.synth import synthesize
from dsh_assets.core.release import cells, transform, values
from dsh_assets.core.release.transform import ALIAS_COLUMN, release
from dsh_assets.core.secrets import Secrets
from dsh_assets_tests.tables import RELEASE_PERIOD, row, sha256_file, write

SCHEMA = load_schema()
CONFIGS = load_configs(schema=SCHEMA)
SECRETS = Secrets(b"seed-one", b"key-one", "test")


def hand_rows() -> list[dict]:
    """Cell A: exactly k=5 rows (kept). Cell B: 2+2+1 rows over three windows, 5 in their hour. C: 1 row."""
    cell_a = [row(f"35840000000{i}", 0, app="Gaming", radio="5G") for i in (1, 1, 2, 3, 4)]
    cell_a[0]["dl_throughput_kbps"] = 1000.0  # the column maximum
    cell_b = [row(f"35850000000{i}", minute, app="Streaming", radio="4G") for i, minute in
              ((1, 0), (2, 0), (3, 10), (4, 10), (5, 20))]
    cell_c = [row("358409999999", 30, province="Lappi", app="IM", radio="3G")]
    return cell_a + cell_b + cell_c


@pytest.fixture
def source(tmp_path):
    raw = write(tmp_path / "raw.parquet", hand_rows())
    ingested = tmp_path / "source.parquet"
    summary = ingest_source(raw, ingested, SCHEMA, book=DigestBook())
    return ingested, summary.apps


def run(source, tmp_path, config_id, secrets=SECRETS, name="out.parquet", **kwargs):
    path, apps = source
    out = tmp_path / name
    plan = release(path, out, CONFIGS[config_id], SCHEMA, secrets, apps, period=RELEASE_PERIOD,
                   **{"book": DigestBook(), **kwargs})
    return plan, pq.read_table(out)


def test_cell_of_exactly_k_rows_is_kept_and_of_k_minus_one_withheld(source, tmp_path):
    plan, table = run(source, tmp_path, "c15_window_k5_noise5")
    assert plan.rows_in == 11 and plan.rows_released == 5
    assert plan.keep.tolist() == [True] * 5 + [False] * 6
    assert set(table.column("application_category").to_pylist()) == {"Gaming"}
    assert plan.min_released_cell == 5 and plan.cells_withheld == 4  # B's three windows and C


def test_hour_windows_and_app_groups_merge_cells_before_suppression(source, tmp_path):
    plan, table = run(source, tmp_path, "c17_hour_groups_k5_noise10")
    assert plan.rows_released == 10  # A and B each make a 5-row hour cell; C stays alone
    assert set(table.column("application_category").to_pylist()) == {"Media"}
    assert {t.minute for t in table.column("time_start").to_pylist()} == {0}


def test_identifier_removal_keeps_every_row_and_the_station(source, tmp_path):
    plan, table = run(source, tmp_path, "id_removal")
    assert plan.rows_released == 11 and plan.min_released_cell is None
    assert "enb_id" in table.column_names
    assert not set(SCHEMA.identifiers) & set(table.column_names)
    assert sorted(table.column("dl_throughput_kbps").to_pylist()) == sorted(r["dl_throughput_kbps"] for r in hand_rows())


def test_stored_source_is_ordered_by_cell_not_by_subscriber(source):
    stored = pq.read_table(source[0])
    minutes = [t.minute for t in stored.column("time_start").to_pylist()]
    assert minutes == sorted(minutes)
    assert stored.column("row_id").to_pylist() == list(range(11))


def test_dropped_fields_and_no_row_id_in_release(source, tmp_path):
    _, table = run(source, tmp_path, "c15_window_k5_noise5")
    assert table.column_names == [
        "time_start", "province", "application_category", "radio_access_type", *SCHEMA.measurements
    ]


def test_noise_moves_values_within_bounds_and_clips_at_the_column_maximum(source, tmp_path):
    config = dataclasses.replace(CONFIGS["id_removal"], noise_scale=2.0)
    path, apps = source
    release(path, tmp_path / "noisy.parquet", config, SCHEMA, SECRETS, apps, period=RELEASE_PERIOD, book=DigestBook())
    values = np.array(pq.read_table(tmp_path / "noisy.parquet").column("dl_throughput_kbps").to_pylist())
    assert values.min() >= 0.0 and values.max() <= 1000.0
    assert (values != 10.0).sum() >= 9  # with scale 2 every 10.0 moves, most far
    assert (values[1:] > 10.0).any() and (values[1:] < 10.0).any()


def test_alias_is_stable_within_a_release_and_differs_across_keys(source, tmp_path):
    _, table = run(source, tmp_path, "c16_window_k5_noise5_key")
    aliases = table.column(ALIAS_COLUMN).to_pylist()
    # alias_scope "period": HMAC under a key derived from the alias key and the period.
    period_key = hmac.new(b"key-one", b"dsh-alias-period\x00" + RELEASE_PERIOD.encode(), hashlib.sha256).digest()
    expected = "s_" + hmac.new(period_key, b"358400000001", hashlib.sha256).hexdigest()[:20]
    assert aliases.count(expected) == 2  # the subscriber with two rows in cell A, one alias
    assert len(set(aliases)) == 4
    _, other = run(source, tmp_path, "c16_window_k5_noise5_key", Secrets(b"seed-one", b"key-two", "test"), "other.parquet")
    assert not set(aliases) & set(other.column(ALIAS_COLUMN).to_pylist())
    assert all(alias.startswith("s_") and len(alias) == 22 for alias in aliases)


@pytest.mark.parametrize("key_bytes", [0, 7, 32, 64, 65, 200])  # HMAC hashes keys longer than a block (64)
def test_aliases_are_hmac_sha256_for_keys_of_any_length(key_bytes):
    key = bytes(range(256))[:key_bytes]
    subscribers = pa.array(["358400000001", "358400000002", "358400000001", "é"])
    expected = ["s_" + hmac.new(key, value.encode(), hashlib.sha256).hexdigest()[:20]
                for value in subscribers.to_pylist()]
    aliaser = transform._Aliaser(key)
    assert aliaser(subscribers).to_pylist() == expected
    assert aliaser(subscribers.slice(1)).to_pylist() == expected[1:]  # the cached aliases


def test_aliases_stay_exact_when_the_md5_halves_collide(monkeypatch):
    # A stand-in for the md5 whose first half is the value's length: most lookups first meet a value they must
    # not take the alias of (the last half, the md5's own, tells them apart).
    def weak_halves(self, values):
        listed = values.to_pylist()
        return (np.array([len(value) for value in listed], dtype=np.uint64),
                np.array([int(hashlib.md5(value.encode()).hexdigest()[16:], 16) for value in listed], dtype=np.uint64))

    monkeypatch.setattr(transform._Aliaser, "_md5_halves", weak_halves)
    rng = np.random.default_rng(7)
    population = [f"35840{number}" for number in rng.integers(0, 10 ** 7, 300)] + ["1", "2", "12", "21"]
    aliaser = transform._Aliaser(b"key-one")
    for _ in range(6):
        batch = pa.array([population[i] for i in rng.integers(0, len(population), 200)])
        expected = ["s_" + hmac.new(b"key-one", value.encode(), hashlib.sha256).hexdigest()[:20]
                    for value in batch.to_pylist()]
        assert aliaser(batch).to_pylist() == expected


def test_same_seed_same_bytes_other_seed_other_bytes(source, tmp_path):
    run(source, tmp_path, "c15_window_k5_noise5", name="a.parquet")
    run(source, tmp_path, "c15_window_k5_noise5", name="b.parquet")
    run(source, tmp_path, "c15_window_k5_noise5", Secrets(b"seed-two", b"key-one", "test"), "c.parquet")
    assert sha256_file(tmp_path / "a.parquet") == sha256_file(tmp_path / "b.parquet")
    assert sha256_file(tmp_path / "a.parquet") != sha256_file(tmp_path / "c.parquet")


@pytest.mark.parametrize("config_id", ["c15_window_k5_noise5", "c16_window_k5_noise5_key", "c17_hour_groups_k5_noise10"])
def test_batch_size_does_not_change_bytes(source, tmp_path, config_id):
    run(source, tmp_path, config_id, name="whole.parquet")
    for batch_rows in (1, 2, 3, 7):
        run(source, tmp_path, config_id, name=f"b{batch_rows}.parquet", batch_rows=batch_rows)
        assert sha256_file(tmp_path / f"b{batch_rows}.parquet") == sha256_file(tmp_path / "whole.parquet")


def test_the_value_stage_and_the_truth_are_kept_in_private_folders_removed_with_them(source, tmp_path,
                                                                                    monkeypatch):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    plan, table = run(source, tmp_path, "c22_hour_k5_shuffle_code10_round3")
    # release() removed its stage's folder; the truth's stays with the (cached) plan
    assert [folder.parent for folder in scratch.iterdir()] == [scratch]
    assert plan.origins.folder.parent == scratch and plan.origins.folder.stat().st_mode & 0o777 == 0o700
    path, _ = source
    stage = transform.ValueStage.of(path, plan, CONFIGS["c22_hour_k5_shuffle_code10_round3"], SCHEMA, SECRETS,
                                    RELEASE_PERIOD)
    positions = np.arange(plan.rows_released)[::-1].copy()
    for name, column in stage.columns_at(positions).items():  # what the write took, read back at any positions
        assert column.to_pylist() == table.column(name).to_pylist()[::-1]
    folders = [stage.values.folder, plan.origins.folder]
    del stage, plan  # dropped without remove(): each folder goes with its columns
    transform._stored_plan.cache_clear()
    assert not any(folder.exists() for folder in folders)


def test_grouping_that_misses_an_app_is_refused_and_writes_nothing(source, tmp_path):
    groups = tuple((g, tuple(a for a in apps if a != "IM")) for g, apps in CONFIGS["c17_hour_groups_k5_noise10"].app_groups)
    config = dataclasses.replace(CONFIGS["c17_hour_groups_k5_noise10"], app_groups=groups)
    path, apps = source
    with pytest.raises(ConfigError, match="does not cover 1 app.*: IM"):
        release(path, tmp_path / "refused.parquet", config, SCHEMA, SECRETS, apps, period=RELEASE_PERIOD,
                book=DigestBook())
    assert list(tmp_path.glob("*refused*")) == []


def test_a_refusal_names_an_app_unless_it_is_shaped_like_an_identifier():
    """The message reaches Dagster's event log: a phone number in the app column is named by its shape only."""
    config = CONFIGS["c17_hour_groups_k5_noise10"]
    with pytest.raises(ConfigError) as refused:
        transform.check_app_coverage(config, {"Gaming", "Teleport", "+358 40 123 4567", "358401234567"})
    message = str(refused.value)
    assert "does not cover 3 app(s)" in message and "Teleport" in message
    assert "358" not in message and "2 identifier-shaped values" in message


def test_batch_noise_matches_large_source_determinism(tmp_path):
    """Many rows over several row groups: the streamed result equals the one-batch result."""
    rows = [row(f"3584{i:08d}", (i % 6) * 10, app=("Gaming", "IM")[i % 2], value=float(i % 97)) for i in range(3000)]
    raw = write(tmp_path / "raw.parquet", rows)
    ingest_source(raw, tmp_path / "src.parquet", SCHEMA, book=DigestBook())
    apps = ("Gaming", "IM")
    for batch_rows in (3000, 256):
        release(tmp_path / "src.parquet", tmp_path / f"r{batch_rows}.parquet", CONFIGS["c15_window_k5_noise5"],
                SCHEMA, SECRETS, apps, period=RELEASE_PERIOD, batch_rows=batch_rows, book=DigestBook())
    assert sha256_file(tmp_path / "r3000.parquet") == sha256_file(tmp_path / "r256.parquet")


def test_a_coarsened_release_through_several_scratch_buckets_is_the_same_file_and_leaves_none(tmp_path, monkeypatch):
    rows = [row(f"3584{i:08d}", (i % 6) * 10, app=("Gaming", "IM", "VoIP")[i % 3], value=float(i % 97))
            for i in range(3000)]
    ingest_source(write(tmp_path / "raw.parquet", rows), tmp_path / "src.parquet", SCHEMA, book=DigestBook())
    config, apps = CONFIGS["c17_hour_groups_k5_noise10"], ("Gaming", "IM", "VoIP")
    out = tmp_path / "released"
    plan = release(tmp_path / "src.parquet", out / "one.parquet", config, SCHEMA, SECRETS, apps,
                   period=RELEASE_PERIOD, book=DigestBook())
    assert not plan.contiguous  # hours gather the rows of six windows: the bucket path
    monkeypatch.setattr(tables, "SCRATCH_BUCKET_ROWS", 700)  # five buckets
    release(tmp_path / "src.parquet", out / "five.parquet", config, SCHEMA, SECRETS, apps, period=RELEASE_PERIOD,
            batch_rows=256, book=DigestBook())
    assert sha256_file(out / "five.parquet") == sha256_file(out / "one.parquet")

    def failing(batches, out_path, target, stage, book):
        next(iter(batches))  # the buckets are filled, one is being read
        raise OSError("the disk went away")

    monkeypatch.setattr(transform, "write_release_file", failing)
    with pytest.raises(OSError, match="the disk went away"):
        release(tmp_path / "src.parquet", out / "failed.parquet", config, SCHEMA, SECRETS, apps,
                period=RELEASE_PERIOD, book=DigestBook())
    assert sorted(path.name for path in out.iterdir()) == ["five.parquet", "one.parquet"]


@pytest.mark.parametrize("config_id", ["c15_window_k5_noise5", "c16_window_k5_noise5_key", "c17_hour_groups_k5_noise10"])
def test_the_content_digest_taken_while_writing_is_the_one_read_back(source, tmp_path, monkeypatch, config_id):
    from dsh_assets.core.release import digest

    book = DigestBook()
    run(source, tmp_path, config_id, name="out.parquet", batch_rows=3, book=book)
    read_back = digest._content_sha256_of_file(tmp_path / "out.parquet")

    def no_second_read(path):
        raise AssertionError("the release was read back for its content digest")

    monkeypatch.setattr(digest, "_content_sha256_of_file", no_second_read)
    assert digest.content_sha256(tmp_path / "out.parquet", book) == read_back


def test_a_coarsened_release_that_withholds_every_row_writes_an_empty_file(tmp_path):
    # Gaming (Media) and IM (Messaging) alternate in the stored order: (0, Gaming), (0, IM), (10, Gaming), ...
    rows = [row(f"35840000000{minute // 10}{app == 'IM'}", minute, app=app) for minute in (0, 10)
            for app in ("Gaming", "IM")]
    ingest_source(write(tmp_path / "raw.parquet", rows), tmp_path / "src.parquet", SCHEMA, book=DigestBook())
    plan = release(tmp_path / "src.parquet", tmp_path / "out.parquet", CONFIGS["c17_hour_groups_k5_noise10"],
                   SCHEMA, SECRETS, ("Gaming", "IM"), period=RELEASE_PERIOD, book=DigestBook())
    assert plan.rows_released == 0 and not plan.contiguous
    released = pq.read_table(tmp_path / "out.parquet")
    assert released.num_rows == 0 and released.schema.names == transform.released_schema(
        CONFIGS["c17_hour_groups_k5_noise10"], SCHEMA).names
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.parquet", "raw.parquet", "src.parquet"]


def test_a_failing_write_raises_in_the_caller_and_leaves_no_file(tmp_path):
    from dsh_assets.core.files import parquet_file

    schema = pa.schema([("a", pa.int64())])
    wrong = pa.RecordBatch.from_pydict({"b": pa.array(["x"])})
    with pytest.raises(Exception):
        with parquet_file(tmp_path / "out.parquet", schema, [], book=DigestBook()) as writer:
            writer.write(pa.RecordBatch.from_pydict({"a": pa.array([1])}, schema=schema))
            writer.write(wrong)
    assert list(tmp_path.iterdir()) == []


def float64_exp_log() -> str:
    """Whose float64 exp and log numpy runs here: its own AVX512F code where the CPU has AVX512F, the C
    library's elsewhere. The two round some inputs differently in the last place, and the synthetic source
    and the noise are exps and logs, so their bytes are pinned per kind of machine (both measured)."""
    from numpy._core._multiarray_umath import __cpu_features__

    return "numpy-avx512f" if __cpu_features__.get("AVX512F") else "libm"


STORED_SOURCE_DIGESTS = {
    "numpy-avx512f": "5942386540441b12772545ecced7dc456b846e62f94ae36a05c467a16735987e",
    "libm": "28aca9338e14b82d9c7e641327eaacd35e0065c7e508569bc6a1f894e313ea37",
}
"""SHA-256 of the stored source of the fixed small input, re-pinned when its identifiers stopped being
dictionary-encoded, then when they were written uncompressed and without statistics (the same rows each time).
The libm pin is computed on an AVX512F machine with numpy's exp and log replaced by math.exp and math.log
(which reproduced the previous libm pin)."""
RELEASE_DIGESTS = {
    "numpy-avx512f": {
        "id_removal": "e6031a5f69305677e153cfce9bac8a79e2ac14e74e5e41a14dacb67cc02cfcbc",
        "c15_window_k5_noise5": "de9fc7b1752b68e03434a0de9de312a2733d0395683ed54cbf70377092d06f88",
        "c16_window_k5_noise5_key": "207d39bf604a36c5c04a1dd238d0cd3612a9e0d8593b6e9ee515fea4e780ca55",
        "c17_hour_groups_k5_noise10": "28e3df9e337fd4d345653ef675354ea357c7180f9c30599b3bc59beb080a78f0",
        "c18_window_k5_shuffle": "1cc3cfe641f79201603e75084eaaec89e3eb40e756d0c6cf9913a6d87feed735",
        "c19_window_microagg10": "5eaff825bbe0cd1bee04dac22cc8fcec4d83ec7ab3c2d27e2cf289426ef10459",
        "c20_window_k5_swap5": "4f967479db5bbb0543ee16be5ce9c0f0c67209e1db5b10a3312fadd41ac8aa21",
        "c21_window_microagg10_shuffle": "cc72ba9ed27e1affecae9bc9d142c9685bfcd779608a857f99f539c24b591c7f",
        "c22_hour_k5_shuffle_code10_round3": "667727333f5a60c6713b766de979062aa5e273d3e5d29e38d59a167e7389fcc4",
        "c23_hour_k5_shuffle_noise2_code10_round3": "000399650f3a2bae9c617616137f1d7e9248f67c72a0716c240b44875a465da6",
        "c24_hour_k5_copula_code10_round3": "f3681a63b04d90eff3e78466e079f5bf5197d3e308ab1a4db1a251c621934a19",
    },
    "libm": {
        "id_removal": "2038124c602ddd6c2da257323bd81e96ccbe11f08ec6abc11be477e077c92e7d",
        "c15_window_k5_noise5": "df4a8e7d677ed9ba9642e7571e74fe1072c82fb43efd88c1242ee6dbb01660fc",
        "c16_window_k5_noise5_key": "c3c00f0f7b515db96fc391beaa65c04510b9ae86112ff0f1214bdc17854edc0a",
        "c17_hour_groups_k5_noise10": "e25da84d11203d49bed3fcb885d74cb2644ad8bd5067d10e30b28a34201134bb",
        "c18_window_k5_shuffle": "1e71f787c19344cce07a987447fb09d5ad7dfae91045c9ce493162c15ea75483",
        "c19_window_microagg10": "530763cf1f443175c3bb0f90dfb0535a060c9f55655a4ce67dbcbd22d21188fc",
        "c20_window_k5_swap5": "9d4162118ddee17eaf0b7662d622a3c4fcbda22d498026e4521fe27aeb80553c",
        "c21_window_microagg10_shuffle": "6141d9559c7e156f2f7ed8122d4e5711a19799dbeb773e2668ceaf0bc4d999f6",
        "c22_hour_k5_shuffle_code10_round3": "667727333f5a60c6713b766de979062aa5e273d3e5d29e38d59a167e7389fcc4",
        "c23_hour_k5_shuffle_noise2_code10_round3": "000399650f3a2bae9c617616137f1d7e9248f67c72a0716c240b44875a465da6",
        "c24_hour_k5_copula_code10_round3": "f3681a63b04d90eff3e78466e079f5bf5197d3e308ab1a4db1a251c621934a19",
    },
}
"""SHA-256 of each row-level release of a fixed small source (every configuration of a period), per
``float64_exp_log``; the libm ones computed as the stored source's (numpy's exp and log replaced by math's, which
reproduces the earlier libm pins). c22's, c23's and c24's are the same on both: rounding to 3 significant digits takes
the last-place differences of the source's values and of the noise away, and c24's draws only order positions
(kept as float32, a last-place difference of a float64 draw does not reach them). Any change to these bytes must be deliberate."""


def test_release_bytes_are_pinned(tmp_path):
    schema = load_schema()
    raw, source = tmp_path / "raw.parquet", tmp_path / "source.parquet"
    synthesize(raw, rows=4000, subscribers=800, seed=7, period=dt.date(2026, 11, 20), schema=schema)
    summary = ingest_source(raw, source, schema, book=DigestBook())
    assert sha256_file(source) == STORED_SOURCE_DIGESTS[float64_exp_log()]
    secrets = Secrets(b"fixed-noise-seed", b"fixed-alias-key", "configured")
    digests = {}
    for config_id, config in publishable_configs(load_configs(None, schema)).items():
        if config.kind == ROW_RELEASE:
            release(source, tmp_path / f"{config_id}.parquet", config, schema, secrets, summary.apps,
                    period=RELEASE_PERIOD, book=DigestBook())
            digests[config_id] = sha256_file(tmp_path / f"{config_id}.parquet")
    assert digests == RELEASE_DIGESTS[float64_exp_log()]


@pytest.fixture(scope="module")
def synthetic_source(tmp_path_factory):
    directory = tmp_path_factory.mktemp("independence")
    synthesize(directory / "raw.parquet", rows=6000, subscribers=1200, seed=11, period=dt.date(2026, 11, 20))
    summary = ingest_source(directory / "raw.parquet", directory / "source.parquet", SCHEMA, book=DigestBook())
    return directory, summary.apps


def _released_by_source_row(directory, apps, config, name):
    """A release of the synthetic source, its rows put back in source-row order (evaluator truth)."""
    out = directory / name
    plan = release(directory / "source.parquet", out, config, SCHEMA, SECRETS, apps, period=RELEASE_PERIOD,
                   book=DigestBook())
    table = pq.read_table(out)
    return table.take(pa.array(np.argsort(plan.order))), np.sort(plan.order), plan


def test_two_configurations_never_share_a_noise_draw(synthetic_source):
    """The c15 / c17 recovery: with one shared draw, c15^2 / c17 (scales 0.05 and 0.10) is the original value."""
    directory, apps = synthetic_source
    c15 = dataclasses.replace(CONFIGS["c15_window_k5_noise5"], k=0)
    doubled = dataclasses.replace(c15, id="c17_hour_groups_k5_noise10", noise_scale=0.10)
    same_draw = dataclasses.replace(doubled, id=c15.id)  # what every configuration did before: one draw

    def recovered(other) -> float:
        a, rows, _ = _released_by_source_row(directory, apps, c15, "a.parquet")
        b, _, _ = _released_by_source_row(directory, apps, other, f"{other.id}-{other.noise_scale}.parquet")
        truth = pq.read_table(directory / "source.parquet").take(pa.array(rows))
        column = "dl_throughput_kbps"
        x, ra, rb = (np.asarray(t.column(column).to_numpy(zero_copy_only=False), dtype=float) for t in (truth, a, b))
        usable = (x > 0) & (rb > 0) & (ra < np.nanmax(ra)) & (rb < np.nanmax(rb))  # zero and clipped values say nothing
        estimate = ra[usable] ** 2 / rb[usable]
        return float(np.mean(np.isclose(estimate, x[usable], rtol=1e-9)))

    assert recovered(same_draw) > 0.99, "the recovery must work on a shared draw, or this test proves nothing"
    assert recovered(doubled) < 0.001


def test_aligning_two_releases_by_position_relinks_no_more_than_chance(synthetic_source):
    directory, apps = synthetic_source
    c15 = CONFIGS["c15_window_k5_noise5"]
    c16 = CONFIGS["c16_window_k5_noise5_key"]
    a = release(directory / "source.parquet", directory / "pa.parquet", c15, SCHEMA, SECRETS, apps,
                period=RELEASE_PERIOD, book=DigestBook())
    b = release(directory / "source.parquet", directory / "pb.parquet", c16, SCHEMA, SECRETS, apps,
                period=RELEASE_PERIOD, book=DigestBook())
    assert np.array_equal(np.sort(a.order), np.sort(b.order))  # the same rows, each release in its own order
    same_position = int((a.order == b.order).sum())
    # A random order within each released cell puts a row at the same position in both with chance 1/size:
    # one expected match per cell, whatever its size.
    cells = int((a.cell_sizes >= c15.k).sum())
    assert same_position <= cells + 4 * np.sqrt(cells), (same_position, cells, len(a.order))
    # and the rows of a cell stay together: a position names the released cell, nothing finer
    cell_of = pq.read_table(directory / "pa.parquet", columns=["time_start", "province", "application_category",
                                                               "radio_access_type"]).to_pandas()
    runs = (cell_of != cell_of.shift()).any(axis=1).sum()
    assert runs == cells


@pytest.mark.parametrize("chunk_rows", [1, 7, 500, 1 << 22])
def test_the_order_made_a_few_cells_at_a_time_is_the_order_of_one_sort(synthetic_source, monkeypatch, chunk_rows):
    directory, _ = synthetic_source
    config = CONFIGS["c15_window_k5_noise5"]
    source = directory / "source.parquet"
    monkeypatch.setattr(values, "CHUNK_ROWS", chunk_rows)
    plan = transform.plan_release(source, config, SCHEMA, pq.ParquetFile(source).metadata.num_rows, SECRETS,
                                  RELEASE_PERIOD)
    assert plan.contiguous and plan.cells_withheld > 0
    cell_of = np.repeat(np.arange(len(plan.cell_sizes)), plan.cell_sizes)
    assert np.array_equal(plan.keep, plan.cell_sizes[cell_of] >= config.k)
    kept = np.flatnonzero(plan.keep)
    one_sort = transform._ordered(kept, cell_of[kept], transform.order_key(SECRETS, config, RELEASE_PERIOD))
    assert np.array_equal(plan.order, one_sort)


def test_the_plan_holds_row_ids_and_positions_in_32_bits_below_two_billion_rows(synthetic_source):
    directory, _ = synthetic_source
    source = directory / "source.parquet"
    plan = transform.plan_release(source, CONFIGS["c17_hour_groups_k5_noise10"], SCHEMA,
                                  pq.ParquetFile(source).metadata.num_rows, SECRETS, RELEASE_PERIOD)
    assert not plan.contiguous  # the path that orders with one sort, not by runs
    position = plan.position_of_row()
    assert plan.order.dtype == position.dtype == np.int32
    assert np.array_equal(position[plan.order], np.arange(len(plan.order)))
    assert (position[~plan.keep] == -1).all()
    assert transform.row_id_dtype(2**31 - 1) == np.int32 and transform.row_id_dtype(2**31) == np.int64


def _plan_by_definition(table: pa.Table, config) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keep mask, cell sizes and row order from the definition, row by row: cells by the pyarrow coarsening,
    numbered in sorted order; kept rows ordered by (cell, keyed word, row id)."""
    row_cells = list(zip(cells.coarsen_time(table.column("time_start"), config).to_pylist(),
                     table.column("province").to_pylist(),
                     cells.coarsen_app(table.column("application_category"), config).to_pylist(),
                     table.column("radio_access_type").to_pylist()))
    number = {cell: i for i, cell in enumerate(sorted(set(row_cells)))}
    row_ids = table.column("row_id").to_numpy()
    cell_of = np.empty(len(row_ids), dtype=np.int64)
    cell_of[row_ids] = [number[cell] for cell in row_cells]
    sizes = np.bincount(cell_of, minlength=len(number))
    keep = sizes[cell_of] >= config.k
    words = transform.order_words(transform.order_key(SECRETS, config, RELEASE_PERIOD), np.arange(len(row_ids)))
    kept = np.flatnonzero(keep)
    order = sorted(kept, key=lambda r: (cell_of[r], int(words[r]), r))
    return keep, sizes, np.array(order, dtype=np.int64)


@pytest.mark.parametrize("config_id", ["c15_window_k5_noise5", "c17_hour_groups_k5_noise10"])
def test_the_plan_is_its_definition_whether_cells_are_runs_of_row_ids_or_not(synthetic_source, tmp_path, config_id):
    """A stored source's own cells are runs of row ids, so the plan counts them without a per-row join; with
    the row ids dealt at random, each row's cell comes from the join. Both are the plan of the definition."""
    directory, _ = synthetic_source
    stored = pq.read_table(directory / "source.parquet")
    dealt = stored.set_column(stored.schema.get_field_index("row_id"), "row_id",
                              pa.array(np.random.default_rng(3).permutation(stored.num_rows), pa.int64()))
    pq.write_table(dealt, tmp_path / "dealt.parquet")
    config = CONFIGS[config_id]
    for table, path in ((stored, directory / "source.parquet"), (dealt, tmp_path / "dealt.parquet")):
        plan = transform.plan_release(path, config, SCHEMA, table.num_rows, SECRETS, RELEASE_PERIOD)
        keep, sizes, order = _plan_by_definition(table, config)
        assert np.array_equal(plan.keep, keep) and not keep.all() and keep.any()
        assert np.array_equal(np.sort(plan.cell_sizes), np.sort(sizes))
        assert np.array_equal(plan.order, order)
        assert plan.contiguous == (table is stored and config_id == "c15_window_k5_noise5")


def test_rows_of_equal_rank_go_in_row_id_order(monkeypatch):
    """Ranks tie when two rows of a cell draw the same 40-bit word; the order puts the lower row id first, as
    a stable sort of the ranks would (words of three values here, so most rows tie)."""
    monkeypatch.setattr(transform, "order_words", lambda key, row_ids: (row_ids * 7919 % 3).astype(np.uint64))
    rng = np.random.default_rng(5)
    kept = np.sort(rng.choice(100_000, size=20_000, replace=False))
    cell_of_kept = rng.integers(0, 4, size=len(kept)).astype(np.uint64)
    rank = (cell_of_kept << np.uint64(40)) | (kept * 7919 % 3).astype(np.uint64)
    expected = kept[np.argsort(rank, kind="stable")]
    assert np.array_equal(transform._ordered(kept, cell_of_kept, np.zeros(4, np.uint64)), expected)
    assert np.array_equal(transform._ordered(kept[:1], cell_of_kept[:1], np.zeros(4, np.uint64)), kept[:1])
