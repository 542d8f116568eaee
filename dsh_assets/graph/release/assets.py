"""The `source` and `released` assets: files under the home folder, with provenance metadata."""


import datetime as dt

import dagster as dg
import pyarrow.parquet as pq

from dsh_assets.core import engines
from dsh_assets.core.files import DigestBook
from dsh_assets.core.periods import period_window
from dsh_assets.core.provenance import code_version
from dsh_assets.core.release.digest import content_sha256
from dsh_assets.core.release.source import distinct_apps
from dsh_assets.core.release.synth import synthesize
from dsh_assets.graph.partitions import PERIODS, config_and_period
from dsh_assets.graph.records import materialized, recorded
from dsh_assets.graph.resources import ComputeEngine, DshHome, DshSecrets
from dsh_assets.graph.refusals import refusing

def _column_schema(path) -> dg.TableSchema:
    return dg.TableSchema(columns=[dg.TableColumn(f.name, str(f.type)) for f in pq.read_schema(path)])


def build_source_asset() -> dg.AssetsDefinition:
    @dg.asset(
        name="source",
        partitions_def=PERIODS,
        group_name="release",
        kinds={"parquet", "duckdb", "spark"},
        code_version=code_version(),
        description=(
            "The release period's input table (a real Parquet file, or the deterministic synthetic "
            "default), validated against the declared column roles and stored with a stable row id "
            "(on the configured engine: embedded or Spark, the same stored file)."
        ),
    )
    @refusing
    def source(context: dg.AssetExecutionContext, home: DshHome, engine: ComputeEngine,
               digests: dg.ResourceParam[DigestBook]) -> dg.MaterializeResult:
        period = context.partition_key
        layout, schema = home.layout, home.schema()
        if home.source_path:
            input_path, kind = home.source_path, "file"
            origin = {"kind": kind, "path": str(input_path)}
        else:
            input_path, kind = layout.synthetic_input(period), "synthetic"
            synthesize(
                input_path,
                rows=home.synthetic_rows,
                subscribers=home.synthetic_subscribers,
                seed=home.synthetic_seed,
                period=dt.date.fromisoformat(period),
                schema=schema,
            )
            origin = {"kind": kind, "rows": home.synthetic_rows, "subscribers": home.synthetic_subscribers,
                      "seed": home.synthetic_seed}
        stored = layout.source(period)
        # Rows outside the period's time window are refused, never released as this period.
        summary = engine.get().ingest_source(input_path, stored, schema, period_window(period, home.cadence))
        stored_sha = digests.sha256(stored, own_write=True)
        context.log.info(f"source {period}: {summary.rows} rows, {summary.subscribers} subscribers from {kind}")
        return materialized(
            context, home, data_version=dg.DataVersion(stored_sha),
            metadata={
                "period": period,
                "origin": dg.MetadataValue.json(origin),
                "input_sha256": digests.sha256(input_path),
                "sha256": stored_sha,
                "path": dg.MetadataValue.path(str(stored)),
                "rows": summary.rows,
                "subscribers": summary.subscribers,
                "apps": len(summary.apps),
                "engine": home.engine,
                "code_version": code_version(),
                "dagster/row_count": summary.rows,
                "dagster/column_schema": _column_schema(stored),
            },
        )

    return source


def provenance(config, period: str, source: dict, out_path, secrets, book: DigestBook,
               engine: str = engines.EMBEDDED) -> dict:
    """What every release records, whatever its kind: configuration, checksums (the file's and the content's,
    which does not depend on the layout), the engine, seed id, code, lineage. ``out_path`` is the file the
    step has just written: ``book`` keeps its digests (taken as it was written) for the checks and the evidence.

    Never a row: the release has not been checked yet, and whatever a materialisation records stays in
    Dagster's event log (and its UI) as long as the log is kept. Only `published` shows rows."""
    metadata = {
        "config_id": config.id,
        "config_hash": config.definition_hash(),
        "config": dg.MetadataValue.json({"description": config.description, **config.operations()}),
        "period": period,
        "source_sha256": source["input_sha256"],
        "source_stored_sha256": source["sha256"],
        "sha256": book.sha256(out_path, own_write=True),
        "content_sha256": content_sha256(out_path, book, own_write=True),
        "engine": engine,
        "path": dg.MetadataValue.path(str(out_path)),
        "seed_id": secrets.seed_id,
        "seed_kind": "demo seed (not secret)" if secrets.is_demo else "configured secret",
        "code_version": code_version(),
        "lineage": dg.MetadataValue.json(
            {"source": {"asset": "source", "partition": period, "input_sha256": source["input_sha256"],
                        "stored_sha256": source["sha256"], "origin": source["origin"]},
             "config": {"id": config.id, "hash": config.definition_hash()}}
        ),
    }
    if getattr(config, "pseudonym", False):
        metadata["alias_key_id"] = secrets.alias_key_id
    return metadata


def recorded_source(home: DshHome, book: DigestBook, source_key: dg.AssetKey, period: str) -> dict:
    """The period's stored source as recorded; a Failure when it is missing or no longer what was recorded."""
    source_path = home.layout.source(period)
    record = recorded(home, source_key, period)
    if record is None or not source_path.exists():
        raise dg.Failure(f"source for period {period} is not materialised ({source_path}); materialise it first")
    if book.sha256(source_path) != record.values["sha256"]:
        raise dg.Failure(f"stored source {source_path} differs from its recorded SHA-256; re-materialise the source")
    return record.values


def build_released_asset(partitions: dg.MultiPartitionsDefinition, source: dg.AssetsDefinition) -> dg.AssetsDefinition:
    @dg.asset(
        name="released",
        partitions_def=partitions,
        deps=[source],
        group_name="release",
        kinds={"parquet", "duckdb", "spark"},
        code_version=code_version(),
        description=(
            "The anonymised table of one release configuration for one period: fields dropped, time "
            "and apps coarsened, measurements jittered, small cells withheld, an alias where configured."
        ),
    )
    @refusing
    def released(context: dg.AssetExecutionContext, home: DshHome, secrets: DshSecrets,
                 engine: ComputeEngine, digests: dg.ResourceParam[DigestBook]) -> dg.MaterializeResult:
        config_id, period = config_and_period(context.partition_key)
        layout, schema, config = home.layout, home.schema(), home.configs()[config_id]
        recorded = recorded_source(home, digests, source.key, period)
        keys = secrets.load()
        source_path, out_path = layout.source(period), layout.released(config_id, period)
        plan = engine.get().release(source_path, out_path, config, schema, keys, distinct_apps(source_path, schema),
                                    period=period)
        counts = {"rows_in": plan.rows_in, "rows_released": plan.rows_released,
                  "rows_withheld": plan.rows_in - plan.rows_released}
        metadata = {"cells_withheld": plan.cells_withheld,
                    **provenance(config, period, recorded, out_path, keys, digests, home.engine),
                    **counts, "dagster/row_count": plan.rows_released}
        context.log.info(f"released {config_id} {period}: {counts['rows_released']} rows from {counts['rows_in']} "
                         f"({counts['rows_withheld']} withheld)")
        return materialized(context, home, metadata, dg.DataVersion(metadata["sha256"]))

    return released
