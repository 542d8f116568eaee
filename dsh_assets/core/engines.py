"""The engine that does the work that grows with the data: embedded (DuckDB and pyarrow) or Spark.

Both give the same stored source, the same released rows, values and order (the content digest), and the same
figures. Every pass that differs per engine is a method of ``Engine``; what is computed from the passes' results
is shared code. The Spark implementation (core.spark.engine) is imported only when the spark engine is chosen,
so pyspark stays optional.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, contextmanager
from typing import Callable, Iterator, Protocol

from dsh_assets.core import duck
from dsh_assets.core.dp.publish import Counting, EmbeddedCounting
from dsh_assets.core.files import DigestBook
from dsh_assets.core.privacy import inference as embedded_inference
from dsh_assets.core.privacy import singling_out as embedded_singling_out
from dsh_assets.core.privacy.inference import DEFAULT_THRESHOLD, InferenceResult
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.privacy.singling_out import SinglingOutResult
from dsh_assets.core.release import source as embedded_source
from dsh_assets.core.release import transform as embedded_release
from dsh_assets.core.release.configs import ReleaseConfig
from dsh_assets.core.release.schema import Schema
from dsh_assets.core.release.source import SourceSummary, Window
from dsh_assets.core.secrets import Secrets
from dsh_assets.core.utility.quality_groups import Aggregations, DuckDBAggregations

EMBEDDED = "duckdb"
SPARK = "spark"
ENGINES = (EMBEDDED, SPARK)
ON_ENGINE_METRICS = ("singling_out", "inference", "quality_groups", "elina_answers", "dp_elina_answers")
"""The metric assets whose figures are computed on the chosen engine (the others run embedded on every engine);
dp_elina_answers computes its base answers there, the DP medians' stability draws stay embedded."""

SessionFactory = Callable[[], object]
"""Returns the Spark session; called only on the spark engine (the session starts on first use)."""


class ReleaseCounts(Protocol):
    """What a release counted (the embedded engine's ReleasePlan holds more: the evaluator's truth)."""

    rows_in: int
    rows_released: int
    cells_withheld: int


class Engine(Protocol):
    """The passes over whole files, on one engine: ingest, release, the exact attacks, the DP tables' counting
    (``counting``) and the utility metrics' aggregations (``aggregations``)."""

    name: str
    book: DigestBook
    """Where the passes keep what they take of a file (its digests, a source's statistics), while the file stays as
    it is: the definitions' ``digests``, so a file written by one step is not read again to be hashed by the next,
    and the source's passes run once for every configuration released from it."""

    def ingest_source(self, path: str | os.PathLike, out_path: str | os.PathLike, schema: Schema,
                      window: Window | None) -> SourceSummary:
        """Validate the input and store it with row ids."""

    def release(self, source_path: str | os.PathLike, out_path: str | os.PathLike, config: ReleaseConfig,
                schema: Schema, secrets: Secrets, apps_in_source, *, period: str) -> ReleaseCounts:
        """Write the release atomically (a refused configuration writes nothing)."""

    def singling_out(self, attacked: ReleaseUnderTest, secrets: Secrets, period: str) -> SinglingOutResult:
        """The exact singling-out counts of a stored release."""

    def inference(self, attacked: ReleaseUnderTest, secrets: Secrets, period: str,
                  threshold: float = DEFAULT_THRESHOLD) -> InferenceResult:
        """The exact class-majority inference counts of a stored release."""

    def counting(self) -> Counting:
        """The DP tables' contribution bounding and true counts (the noise is drawn on the driver either way)."""

    def aggregations(self) -> AbstractContextManager[Aggregations]:
        """The passes behind the utility metrics, open for the ``with`` block."""


class EmbeddedEngine:
    """DuckDB and pyarrow in this process."""

    name = EMBEDDED

    def __init__(self, book: DigestBook):
        self.book = book

    def ingest_source(self, path, out_path, schema, window):
        return embedded_source.ingest_source(path, out_path, schema, window, book=self.book)

    def release(self, source_path, out_path, config, schema, secrets, apps_in_source, *, period):
        return embedded_release.release(source_path, out_path, config, schema, secrets, apps_in_source,
                                        period=period, book=self.book)

    def singling_out(self, attacked, secrets, period):
        return embedded_singling_out.evaluate(attacked)

    def inference(self, attacked, secrets, period, threshold=DEFAULT_THRESHOLD):
        return embedded_inference.evaluate(attacked, threshold=threshold)

    def counting(self):
        return EmbeddedCounting(self.book)

    @contextmanager
    def aggregations(self) -> Iterator[Aggregations]:
        with duck.connect() as connection:
            yield DuckDBAggregations(connection, self.book)


def engine_for(name: str, book: DigestBook, session: SessionFactory | None = None) -> Engine:
    """The engine called ``name``, keeping its figures in ``book``; ``session`` gives the Spark session (started on
    first use)."""
    if check_engine(name) == SPARK:
        from dsh_assets.core.spark.engine import SparkEngine

        if session is None:
            raise ValueError("the spark engine needs a Spark session")
        return SparkEngine(session, book)
    return EmbeddedEngine(book)


def check_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r} is not one of {', '.join(ENGINES)}")
    return engine
