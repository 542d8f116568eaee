"""The resources over one home: what they read from it, and the hand-over of an asset's output."""

import dagster as dg
import pytest

from dsh_assets.graph.resources import BudgetLedger, DshHome, HandOver, Publications, resources_for

PARTITIONS = dg.StaticPartitionsDefinition(["2026-11-20"])


@dg.asset(partitions_def=PARTITIONS, io_manager_key="handed_over")
def gathered(context: dg.AssetExecutionContext) -> dg.Output:
    return dg.Output({"period": context.partition_key, "figures": [0.25, 0.5]})


@dg.asset(partitions_def=PARTITIONS, ins={"handed": dg.AssetIn("gathered")})
def shown(handed: dict) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"figures": handed["figures"], "period": handed["period"]})


def _run(tmp_path, selection) -> dg.ExecuteInProcessResult:
    job = dg.define_asset_job("hand_over", selection=selection)
    defs = dg.Definitions(assets=[gathered, shown], jobs=[job],
                          resources={"handed_over": HandOver(home=DshHome(home=str(tmp_path)))})
    return defs.resolve_job_def("hand_over").execute_in_process(
        instance=dg.DagsterInstance.ephemeral(), raise_on_error=False, tags={"dagster/partition": "2026-11-20"})


def _shown(result: dg.ExecuteInProcessResult) -> dict:
    (event,) = result.get_asset_materialization_events()
    return {key: value.value for key, value in event.step_materialization_data.materialization.metadata.items()}


def test_an_output_is_handed_over_within_a_run_and_to_a_later_one(tmp_path):
    both = _run(tmp_path, dg.AssetSelection.assets(gathered, shown))
    assert both.success
    assert (tmp_path / "handed_over" / "gathered" / "2026-11-20.pickle").is_file()
    alone = _run(tmp_path, dg.AssetSelection.assets(shown))  # a later run reads what the earlier one handed over
    assert alone.success and _shown(alone) == {"figures": [0.25, 0.5], "period": "2026-11-20"}


def test_nothing_handed_over_fails_with_the_missing_file_named(tmp_path):
    alone = _run(tmp_path, dg.AssetSelection.assets(shown))
    assert not alone.success
    (failure,) = [event for event in alone.all_events if event.is_step_failure]
    assert "gathered 2026-11-20 has handed nothing over" in failure.step_failure_data.error.message


@pytest.mark.parametrize("name", ["engine", "secrets", "ledger", "publications", "handed_over"])
def test_every_resource_reads_the_one_home(tmp_path, name):
    home = DshHome(home=str(tmp_path), releases_file="", cadence="daily")
    assert resources_for(home)[name].home is home


def test_the_ledger_and_the_policy_come_from_the_homes_releases_file(tmp_path):
    home = DshHome(home=str(tmp_path))
    caps = home.releases().budget_caps
    ledger = BudgetLedger(home=home).ledger()
    assert (ledger.period_cap, ledger.year_cap) == (caps.period_cap, caps.year_cap)
    assert Publications(home=home).policy() is home.releases().publication
