"""The DP synthetic table in the graph: `dp_synthetic_release`, drawn once a period through its own budget slice."""

import dagster as dg

from dsh_assets.core.dp.ledger import BudgetExceeded
from dsh_assets.core.dp.synthetic import publish_dp_synthetic
from dsh_assets.core.evidence.metrics import ASSETS_BY_NAME
from dsh_assets.core.files import DigestBook
from dsh_assets.core.provenance import code_version
from dsh_assets.core.release.configs import DP_SYNTHETIC
from dsh_assets.graph.dp.assets import BUDGET_KEYS, DrawOptions
from dsh_assets.graph.metadata import as_metadata
from dsh_assets.graph.partitions import config_and_period
from dsh_assets.graph.records import materialized
from dsh_assets.graph.refusals import refusing
from dsh_assets.graph.release.assets import provenance, recorded_source
from dsh_assets.graph.resources import BudgetLedger, DshHome, DshSecrets


def build_dp_synthetic_release_asset(partitions: dg.MultiPartitionsDefinition,
                                     source: dg.AssetsDefinition) -> dg.AssetsDefinition:
    @dg.asset(name="dp_synthetic_release", partitions_def=partitions, deps=[source], group_name="dp",
              kinds={"parquet", "opendp", "duckdb"}, code_version=code_version(),
              description=ASSETS_BY_NAME["dp_synthetic_release"].description)
    @refusing
    def dp_synthetic_release(context: dg.AssetExecutionContext, config: DrawOptions, home: DshHome,
                             secrets: DshSecrets, ledger: BudgetLedger,
                             digests: dg.ResourceParam[DigestBook]) -> dg.MaterializeResult:
        config_id, period = config_and_period(context.partition_key)
        configured = home.configs()[config_id]
        recorded = recorded_source(home, digests, source.key, period)
        keys, out_path, budget = secrets.load(), home.layout.released(config_id, period), ledger.ledger(DP_SYNTHETIC)
        try:
            outcome = publish_dp_synthetic(home.layout.source(period), out_path, configured, home.schema(), keys,
                                           budget, period, republish=config.republish, book=digests)
        except BudgetExceeded as refusal:
            raise dg.Failure(f"DP synthetic table {config_id} {period} refused: {refusal}") from None
        status = budget.status(period)
        rows = outcome.metadata.get("rows_released")
        context.log.info(f"DP synthetic table {config_id} {period}: "
                         f"{'reused the stored table' if outcome.reused else 'drawn'}, {rows} rows; "
                         f"epsilon debited now {outcome.epsilon_spent:g}")
        metadata = {**as_metadata(outcome.to_metadata(), {
                        "dp": {"epsilon": configured.epsilon, "delta": configured.delta,
                               "rho_spent": outcome.metadata.get("rho_spent"), "tree": outcome.metadata.get("tree")},
                        "budget": {key: status.get(key) for key in BUDGET_KEYS}}),
                    **provenance(configured, period, recorded, out_path, keys, digests),
                    # rows released are drawn, none is a source row; withheld: source rows the bound kept from the model
                    "rows_in": recorded["rows"], "rows_released": rows,
                    "rows_withheld": (outcome.bounding or {}).get("rows_dropped_by_bound"),
                    "epsilon_debited": outcome.epsilon_spent,
                    "republished": config.republish, "dagster/row_count": rows}
        return materialized(context, home, metadata, dg.DataVersion(metadata["sha256"]))

    return dp_synthetic_release
