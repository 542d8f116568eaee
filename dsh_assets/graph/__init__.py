"""The thin Dagster shell: assets, checks, partitions, schedules and resources over the core."""
