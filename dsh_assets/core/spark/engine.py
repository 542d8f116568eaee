"""The spark engine: every pass of core.engines.Engine on a Spark session, started on first use."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from dsh_assets.core.files import DigestBook
from dsh_assets.core.privacy.inference import DEFAULT_THRESHOLD
from dsh_assets.core.spark import privacy, release, source
from dsh_assets.core.spark.dp import SparkCounting
from dsh_assets.core.spark.utility import SparkAggregations


class SparkEngine:
    """The exact attacks join the stored source by row id on Spark, so the release plan is not used here."""

    name = "spark"

    def __init__(self, session: Callable[[], object], book: DigestBook):
        self._session = session
        self.book = book

    def ingest_source(self, path, out_path, schema, window):
        return source.ingest_source(self._session(), path, out_path, schema, window, book=self.book)

    def release(self, source_path, out_path, config, schema, secrets, apps_in_source, *, period):
        return release.release(self._session(), source_path, out_path, config, schema, secrets, apps_in_source,
                               period=period, book=self.book)

    def singling_out(self, attacked, secrets, period):
        return privacy.singling_out(self._session(), attacked.source_path, attacked.config, attacked.schema, secrets,
                                    period)

    def inference(self, attacked, secrets, period, threshold=DEFAULT_THRESHOLD):
        return privacy.inference(self._session(), attacked.source_path, attacked.config, attacked.schema, secrets,
                                 period, threshold)

    def counting(self):
        return SparkCounting(self._session)

    @contextmanager
    def aggregations(self) -> Iterator[SparkAggregations]:
        yield SparkAggregations(self._session())
