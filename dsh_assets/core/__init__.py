"""Functional core of dsh_assets: pure functions over Arrow, DuckDB and pandas, no Dagster."""
