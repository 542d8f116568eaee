"""The engine that does the work that grows with the data: embedded (DuckDB and pyarrow) or Spark.

Both give the same stored source and the same released rows, values and order (the content digest); the
Spark modules are imported only when the spark engine is chosen, so pyspark stays optional.
"""

from __future__ import annotations

import os
from typing import Callable

from dsh_assets.core.dp.publish import EMBEDDED_COUNTING, Counting
from dsh_assets.core.privacy import inference as embedded_inference
from dsh_assets.core.privacy import singling_out as embedded_singling_out
from dsh_assets.core.privacy.inference import InferenceResult
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.privacy.singling_out import SinglingOutResult
from dsh_assets.core.release import source as embedded_source
from dsh_assets.core.release import transform as embedded_release
from dsh_assets.core.release.configs import ReleaseConfig
from dsh_assets.core.release.schema import Schema
from dsh_assets.core.release.source import SourceSummary, Window
from dsh_assets.core.secrets import Secrets
from dsh_assets.core.utility import elina
from dsh_assets.core.utility.elina import ElinaAnswers
from dsh_assets.core.utility.quality_groups import DEFAULT_MIN_RECORDS, Aggregations, QualityResult
from dsh_assets.core.utility.quality_groups import evaluate as evaluate_quality_groups

EMBEDDED = "duckdb"
SPARK = "spark"
ENGINES = (EMBEDDED, SPARK)
ON_ENGINE_METRICS = ("singling_out", "inference", "quality_groups", "elina_answers", "dp_elina_answers")
"""The metric assets whose figures are computed on the chosen engine (the others run embedded on every engine);
dp_elina_answers computes its base answers there, the DP medians' stability draws stay embedded."""
_EMBEDDED_ATTACKS = {"singling_out": embedded_singling_out, "inference": embedded_inference}

SessionFactory = Callable[[], object]
"""Returns the Spark session; called only on the spark engine (the session starts on first use)."""


def check_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r} is not one of {', '.join(ENGINES)}")
    return engine


def ingest_source(engine: str, session: SessionFactory, path: str | os.PathLike, out_path: str | os.PathLike,
                  schema: Schema, window: Window | None) -> SourceSummary:
    """Validate the input and store it with row ids, on ``engine``."""
    if check_engine(engine) == SPARK:
        from dsh_assets.core.spark import source as spark_source

        return spark_source.ingest_source(session(), path, out_path, schema, window)
    return embedded_source.ingest_source(path, out_path, schema, window)


def release(engine: str, session: SessionFactory, source_path: str | os.PathLike, out_path: str | os.PathLike,
            config: ReleaseConfig, schema: Schema, secrets: Secrets, apps_in_source, *, period: str):
    """Write the release on ``engine``; returns what it counted (rows_in, rows_released, cells_withheld)."""
    if check_engine(engine) == SPARK:
        from dsh_assets.core.spark import release as spark_release

        return spark_release.release(session(), source_path, out_path, config, schema, secrets, apps_in_source,
                                     period=period)
    return embedded_release.release(source_path, out_path, config, schema, secrets, apps_in_source, period=period)


def _exact_attack(name: str, engine: str, session: SessionFactory, attacked: ReleaseUnderTest, secrets: Secrets,
                  period: str, **options):
    """Run the exact attack ``name`` of ON_ENGINE_METRICS on ``engine``: core/spark/privacy.<name> over the
    released frame on Spark (the release plan unused), core/privacy/<name>.evaluate on the stored files embedded."""
    if check_engine(engine) == SPARK:
        from dsh_assets.core.spark import privacy as spark_privacy

        attack = getattr(spark_privacy, name)
        return attack(session(), attacked.source_path, attacked.config, attacked.schema, secrets, period, **options)
    return _EMBEDDED_ATTACKS[name].evaluate(attacked, **options)


def singling_out(engine: str, session: SessionFactory, attacked: ReleaseUnderTest, secrets: Secrets,
                 period: str) -> SinglingOutResult:
    """The exact singling-out counts of a stored release, on ``engine`` (the same figures on both)."""
    return _exact_attack("singling_out", engine, session, attacked, secrets, period)


def inference(engine: str, session: SessionFactory, attacked: ReleaseUnderTest, secrets: Secrets, period: str,
              threshold: float = embedded_inference.DEFAULT_THRESHOLD) -> InferenceResult:
    """The exact class-majority inference counts of a stored release, on ``engine`` (the same figures on both)."""
    return _exact_attack("inference", engine, session, attacked, secrets, period, threshold=threshold)


def dp_counting(engine: str, session: SessionFactory) -> Counting:
    """The DP tables' contribution bounding and true counts on ``engine``; the noise is drawn on the driver either
    way, by the same code, so the published tables are the same."""
    if check_engine(engine) == SPARK:
        from dsh_assets.core.spark import dp as spark_dp

        return spark_dp.counting(session)
    return EMBEDDED_COUNTING


def utility_aggregations(engine: str, session: SessionFactory) -> Aggregations | None:
    """The passes over whole files behind the utility metrics, on ``engine`` (None: embedded, DuckDB)."""
    if check_engine(engine) == SPARK:
        from dsh_assets.core.spark.utility import SparkAggregations

        return SparkAggregations(session())
    return None


def quality_groups(engine: str, session: SessionFactory, source_path: str | os.PathLike,
                   released_path: str | os.PathLike, config: ReleaseConfig, schema: Schema, *,
                   min_records: int = DEFAULT_MIN_RECORDS) -> QualityResult:
    """The quality groups of a release, their passes over the files on ``engine`` (the same figures on both)."""
    return evaluate_quality_groups(source_path, released_path, config, schema, min_records=min_records,
                                   aggregations=utility_aggregations(engine, session))


def elina_answers(engine: str, session: SessionFactory, source_path: str | os.PathLike,
                  released_path: str | os.PathLike, config: ReleaseConfig, schema: Schema, *,
                  min_records: int = DEFAULT_MIN_RECORDS) -> ElinaAnswers:
    """Elina's answers on the base data and the release, their passes over the files on ``engine`` (the same on
    both)."""
    return elina.answer(source_path, released_path, config, schema, min_records=min_records,
                        aggregations=utility_aggregations(engine, session))
