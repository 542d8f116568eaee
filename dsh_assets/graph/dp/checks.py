"""The check on the DP release: the privacy budget used stays within its caps."""

import dagster as dg

from dsh_assets.core.dp.ledger import within_caps
from dsh_assets.core.release.configs import DP_COUNTS
from dsh_assets.graph.partitions import config_and_period
from dsh_assets.graph.records import outcome_recorded
from dsh_assets.graph.resources import BudgetLedger, DshHome


def build_budget_check(dp_release: dg.AssetsDefinition, kind: str = DP_COUNTS) -> dg.AssetChecksDefinition:
    """On a DP release asset: the budget slice of its ``kind`` within its caps."""
    partitions = dp_release.partitions_def

    @dg.asset_check(asset=dp_release, name="budget_within_caps", blocking=True, partitions_def=partitions,
                    description="Privacy budget used and left for the period and its year; fails when a cap is crossed.")
    @outcome_recorded
    def budget_within_caps(context: dg.AssetCheckExecutionContext, home: DshHome,
                           ledger: BudgetLedger) -> dg.AssetCheckResult:
        _, period = config_and_period(context.partition_key)
        status = ledger.ledger(kind).status(period)
        return dg.AssetCheckResult(passed=within_caps(status),
                                   metadata={key: _plain(value) for key, value in status.items()})

    return budget_within_caps


def _plain(value):
    return value if isinstance(value, (int, float, str, bool)) else str(value)
