"""The `source` and `released` assets: files under the home folder, with provenance metadata."""


import datetime as dt

import dagster as dg
import pyarrow.parquet as pq

from dsh_assets.core.release.configs import DpCountsConfig
from dsh_assets.core.files import sha256_file
from dsh_assets.core.provenance import code_version
from dsh_assets.core.release.source import distinct_apps, ingest_source
from dsh_assets.core.release.synth import synthesize
from dsh_assets.core.release.transform import release
from dsh_assets.graph.dp import assets as dp
from dsh_assets.graph.history import recorded_metadata
from dsh_assets.graph.resources import DshSettings

PREVIEW_ROWS = 8


def _preview(path, limit: int = PREVIEW_ROWS) -> dg.TableMetadataValue:
    parquet = pq.ParquetFile(path)
    table = parquet.read_row_group(0) if parquet.num_row_groups else parquet.schema_arrow.empty_table()
    records = [
        dg.TableRecord({name: ("" if value is None else str(value)) for name, value in row.items()})
        for row in table.slice(0, limit).to_pylist()
    ]
    schema = dg.TableSchema(columns=[dg.TableColumn(name, "string") for name in table.column_names])
    return dg.MetadataValue.table(records=records, schema=schema)


def _column_schema(path) -> dg.TableSchema:
    return dg.TableSchema(columns=[dg.TableColumn(f.name, str(f.type)) for f in pq.read_schema(path)])


def build_source_asset(periods: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    @dg.asset(
        name="source",
        partitions_def=periods,
        group_name="release",
        kinds={"parquet", "duckdb"},
        code_version=code_version(),
        description=(
            "The release period's input table (a real Parquet file, or the deterministic synthetic "
            "default), validated against the declared column roles and stored with a stable row id."
        ),
    )
    def source(context: dg.AssetExecutionContext, settings: DshSettings) -> dg.MaterializeResult:
        period = context.partition_key
        layout, schema = settings.layout, settings.schema()
        if settings.source_path:
            input_path, kind = settings.source_path, "file"
            origin = {"kind": kind, "path": str(input_path)}
        else:
            input_path, kind = layout.synthetic_input(period), "synthetic"
            synthesize(
                input_path,
                rows=settings.synthetic_rows,
                subscribers=settings.synthetic_subscribers,
                seed=settings.synthetic_seed,
                period=dt.date.fromisoformat(period),
                schema=schema,
            )
            origin = {"kind": kind, "rows": settings.synthetic_rows, "subscribers": settings.synthetic_subscribers,
                      "seed": settings.synthetic_seed}
        stored = layout.source(period)
        summary = ingest_source(input_path, stored, schema)
        stored_sha = sha256_file(stored)
        context.log.info(f"source {period}: {summary.rows} rows, {summary.subscribers} subscribers from {kind}")
        return dg.MaterializeResult(
            data_version=dg.DataVersion(stored_sha),
            metadata={
                "period": period,
                "origin": dg.MetadataValue.json(origin),
                "input_sha256": sha256_file(input_path),
                "sha256": stored_sha,
                "path": dg.MetadataValue.path(str(stored)),
                "rows": summary.rows,
                "subscribers": summary.subscribers,
                "apps": len(summary.apps),
                "code_version": code_version(),
                "dagster/row_count": summary.rows,
                "dagster/column_schema": _column_schema(stored),
            },
        )

    return source


def _provenance(config, period: str, source: dict, out_path, secrets) -> dict:
    """What every release records, whatever its kind: configuration, checksums, seed id, code, lineage."""
    metadata = {
        "config_id": config.id,
        "config_hash": config.definition_hash(),
        "config": dg.MetadataValue.json({"description": config.description, **operations(config)}),
        "period": period,
        "source_sha256": source["input_sha256"],
        "source_stored_sha256": source["sha256"],
        "sha256": sha256_file(out_path),
        "path": dg.MetadataValue.path(str(out_path)),
        "seed_id": secrets.seed_id,
        "seed_kind": "demo seed (not secret)" if secrets.is_demo else "configured secret",
        "code_version": code_version(),
        "lineage": dg.MetadataValue.json(
            {"source": {"asset": "source", "partition": period, "input_sha256": source["input_sha256"],
                        "stored_sha256": source["sha256"], "origin": source["origin"]},
             "config": {"id": config.id, "hash": config.definition_hash()}}
        ),
        "preview": _preview(out_path),
    }
    if getattr(config, "pseudonym", False):
        metadata["alias_key_id"] = secrets.alias_key_id
    return metadata


def operations(config) -> dict:
    if isinstance(config, DpCountsConfig):
        return {"kind": config.kind, "epsilon": config.epsilon, "counts_epsilon": config.counts_epsilon,
                "max_cells_per_subscriber": config.max_cells_per_subscriber, "threshold": config.threshold,
                "time_coarsen": config.time_coarsen, "slow_share_epsilon": config.slow_share_epsilon}
    return {"drop_fields": list(config.drop_fields), "time_coarsen": config.time_coarsen,
            "app_coarsen": config.app_coarsen, "noise_scale": config.noise_scale, "k": config.k,
            "pseudonym": config.pseudonym}


def build_released_asset(partitions: dg.MultiPartitionsDefinition, source: dg.AssetsDefinition) -> dg.AssetsDefinition:
    @dg.asset(
        name="released",
        partitions_def=partitions,
        deps=[source],
        group_name="release",
        kinds={"parquet", "duckdb"},
        code_version=code_version(),
        description=(
            "The anonymised table of one release configuration for one period: fields dropped, time "
            "and apps coarsened, measurements jittered, small cells withheld, an alias where configured."
        ),
    )
    def released(context: dg.AssetExecutionContext, settings: DshSettings) -> dg.MaterializeResult:
        keys = context.partition_key.keys_by_dimension
        config_id, period = keys["config"], keys["period"]
        layout, schema = settings.layout, settings.schema()
        config = settings.configs()[config_id]
        source_path = layout.source(period)
        recorded = recorded_metadata(context.instance, source.key, period, limit=1)
        if not recorded or not source_path.exists():
            raise dg.Failure(f"source for period {period} is not materialised ({source_path}); materialise it first")
        if sha256_file(source_path) != recorded[0]["sha256"]:
            raise dg.Failure(f"stored source {source_path} differs from its recorded SHA-256; re-materialise the source")
        secrets = settings.secrets()
        out_path = layout.released(config_id, period)
        if isinstance(config, DpCountsConfig):
            extra = dp.publish(context, settings, config, period)
            # Rows here are source rows: counted in the release, or dropped by the contribution bound.
            dropped = extra.get("bounding_rows_dropped_by_bound", 0)
            counts = {"rows_in": recorded[0]["rows"], "rows_released": recorded[0]["rows"] - dropped,
                      "rows_withheld": dropped}
            table_rows = pq.ParquetFile(out_path).metadata.num_rows
        else:
            plan = release(source_path, out_path, config, schema, secrets, distinct_apps(source_path, schema))
            extra = {"cells_withheld": plan.cells_withheld}
            counts = {"rows_in": plan.rows_in, "rows_released": plan.rows_released,
                      "rows_withheld": plan.rows_in - plan.rows_released}
            table_rows = plan.rows_released
        metadata = {**extra, **_provenance(config, period, recorded[0], out_path, secrets), **counts,
                    "dagster/row_count": table_rows}
        context.log.info(f"released {config_id} {period}: {counts['rows_released']} rows from {counts['rows_in']} "
                         f"({counts['rows_withheld']} withheld)")
        return dg.MaterializeResult(data_version=dg.DataVersion(metadata["sha256"]), metadata=metadata)

    return released

