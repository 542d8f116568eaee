"""Turn a core result's plain-value metadata into Dagster metadata values."""

import dagster as dg


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
