"""Turn a core result's plain-value metadata into Dagster metadata values."""

import dagster as dg
import pyarrow.parquet as pq

PREVIEW_ROWS = 8


def as_metadata(values: dict, figures: dict) -> dict:
    """Plain values as they are, containers as JSON, None as "n/a"; `figures` under its own key."""
    metadata = {key: _value(value) for key, value in values.items()}
    metadata["figures"] = dg.MetadataValue.json(figures)
    return metadata


def _value(value):
    if isinstance(value, (dict, list, tuple)):
        return dg.MetadataValue.json(value)
    if value is None:
        return dg.MetadataValue.text("n/a")
    return value


def markdown_table(frame) -> dg.MarkdownMetadataValue:
    """A pandas frame as a Markdown table for the UI (no tabulate dependency); None shows as a dash."""
    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "| " + " | ".join("---" for _ in frame.columns) + " |"
    rows = [
        "| " + " | ".join(_cell(value) for value in record) + " |"
        for record in frame.itertuples(index=False, name=None)
    ]
    return dg.MetadataValue.md("\n".join([header, rule, *rows]))


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "/")


def preview(path, limit: int = PREVIEW_ROWS) -> dg.TableMetadataValue:
    """The first rows of a Parquet file as text, for the UI: only of a file every blocking check has passed."""
    parquet = pq.ParquetFile(path)
    table = parquet.read_row_group(0) if parquet.num_row_groups else parquet.schema_arrow.empty_table()
    records = [
        dg.TableRecord({name: ("" if value is None else str(value)) for name, value in row.items()})
        for row in table.slice(0, limit).to_pylist()
    ]
    schema = dg.TableSchema(columns=[dg.TableColumn(name, "string") for name in table.column_names])
    return dg.MetadataValue.table(records=records, schema=schema)
