"""The thin Dagster shell: assets, checks, partitions, schedules and resources over the core."""

import warnings

import dagster as dg


def quiet_dagster_warnings() -> None:
    """Once, where the graph is built (this package is imported before any of its modules): partitioned asset
    checks are a Preview feature, automation conditions and partition mappings Beta; and a multi-partitioned run
    request makes Dagster itself add `dagster/partition/<dimension>` tags, which it then reports as deprecated
    (this code writes no such tag); initialising a nested resource, Dagster calls its own deprecated
    `InitResourceContext.dagster_run`."""
    warnings.filterwarnings("ignore", category=dg.PreviewWarning)
    warnings.filterwarnings("ignore", category=dg.BetaWarning)
    warnings.filterwarnings("ignore", message=r"Non-compliant tag keys like \['dagster/partition/",
                            category=DeprecationWarning)
    warnings.filterwarnings("ignore", message=r"InitResourceContext\.dagster_run is deprecated",
                            category=DeprecationWarning)


quiet_dagster_warnings()
