"""The spark engine's passes on the session it is given: the ingest within the period's window, the release of the
period it is asked for, the attacks at the threshold asked, and the digests of what it writes kept in the caller's
book. (Its counting and aggregations: test_dp and test_utility.)"""

import datetime as dt

import pytest

from dsh_assets.core.files import SHA256, DigestBook
from dsh_assets.core.release.schema import SourceError
from dsh_assets.core.release.source import ingest_source
from dsh_assets.core.release.transform import release
from dsh_assets.core.spark.engine import SparkEngine
from dsh_assets_tests.core.spark.test_release import CONFIGS, SCHEMA, SECRETS
from dsh_assets_tests.tables import RELEASE_PERIOD, T0, row, s, sha256_file, under_test, write

pytestmark = pytest.mark.spark


def kept_digest(book: DigestBook, path) -> str:
    """The SHA-256 ``book`` kept for ``path`` as it was written; "not kept" where it kept none."""
    return book.figure(path, SHA256, lambda _: "not kept")


def test_the_engine_ingests_within_the_window_and_keeps_the_stored_files_digest(spark, tmp_path):
    raw = write(tmp_path / "raw.parquet", [row(s(1), 0), row(s(1), 10, app="IM"), row(s(2), 20)])
    book = DigestBook()
    engine = SparkEngine(lambda: spark, book)
    day = (T0.replace(hour=0), T0.replace(hour=0) + dt.timedelta(days=1))
    summary = engine.ingest_source(raw, tmp_path / "source.parquet", SCHEMA, day)
    assert (summary.rows, summary.subscribers, summary.apps) == (3, 2, ("Gaming", "IM"))
    assert kept_digest(book, tmp_path / "source.parquet") == sha256_file(tmp_path / "source.parquet")
    from_minute_5 = (T0 + dt.timedelta(minutes=5), day[1])
    with pytest.raises(SourceError, match="1 rows outside the period"):
        engine.ingest_source(raw, tmp_path / "late.parquet", SCHEMA, from_minute_5)


def test_the_engine_releases_the_period_asked_and_keeps_the_releases_digest(spark, tmp_path):
    # five rows in one Gaming cell (kept at k = 5), one IM row alone (withheld)
    rows = [row(s(n), 0, value=float(n)) for n in range(1, 6)] + [row(s(6), 30, app="IM")]
    source, config = tmp_path / "source.parquet", CONFIGS["c15_window_k5_noise5"]
    summary = ingest_source(write(tmp_path / "raw.parquet", rows), source, SCHEMA, book=DigestBook())
    book = DigestBook()
    counts = SparkEngine(lambda: spark, book).release(source, tmp_path / "spark.parquet", config, SCHEMA, SECRETS,
                                                      summary.apps, period=RELEASE_PERIOD)
    assert (counts.rows_in, counts.rows_released, counts.cells_withheld) == (6, 5, 1)
    # the noise and the row order are keyed by the period: the embedded release of the same period, byte for byte
    release(source, tmp_path / "embedded.parquet", config, SCHEMA, SECRETS, summary.apps, period=RELEASE_PERIOD,
            book=DigestBook())
    assert kept_digest(book, tmp_path / "spark.parquet") == sha256_file(tmp_path / "embedded.parquet")


def test_the_engines_attacks_read_the_stored_release_at_the_threshold_asked(spark, tmp_path):
    # one class (minute 0, Uusimaa, 5G, station 101) of five subscribers, 3 Gaming and 2 IM: 0.6 of it Gaming,
    # inferable at 0.6 and not at the default 0.9; cells of 3 and 2 rows single nobody out
    rows = [row(s(n), 0, app="Gaming" if n <= 3 else "IM") for n in range(1, 6)]
    attacked = under_test(tmp_path, rows, CONFIGS["id_removal"], secrets=SECRETS)
    engine = SparkEngine(lambda: spark, DigestBook())
    assert engine.inference(attacked, SECRETS, RELEASE_PERIOD, threshold=0.6).inferable_classes == 1
    assert engine.inference(attacked, SECRETS, RELEASE_PERIOD).inferable_classes == 0
    singled_out = engine.singling_out(attacked, SECRETS, RELEASE_PERIOD)
    assert (singled_out.subscribers_singled_out, singled_out.subscribers_released) == (0, 5)
