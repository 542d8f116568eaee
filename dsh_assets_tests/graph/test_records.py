"""The record store's side of a materialisation and of a blocking check: what the publication reads."""

import dagster as dg
import pytest

from dsh_assets.graph.records import (
    EXECUTION_FAILED,
    FAILED,
    NOT_RUN,
    SUCCEEDED,
    check_outcomes,
    materialized,
    outcome_recorded,
)
from dsh_assets.graph.resources import DshHome

PARTITIONS = dg.StaticPartitionsDefinition(["p"])


def _graph(passing: dict[str, bool | None]):
    """An asset with one blocking check per name: passes (True), fails (False) or raises (None)."""

    @dg.asset(partitions_def=PARTITIONS)
    def table(context: dg.AssetExecutionContext, home: DshHome) -> dg.MaterializeResult:
        return materialized(context, home, {"rows": 3})

    def build_check(name: str, passes: bool | None):
        @dg.asset_check(asset=table, name=name, blocking=True, partitions_def=PARTITIONS)
        @outcome_recorded
        def check(context: dg.AssetCheckExecutionContext, home: DshHome) -> dg.AssetCheckResult:
            if passes is None:
                raise RuntimeError("the check cannot read its file")
            return dg.AssetCheckResult(passed=passes)

        return check

    return [table, *(build_check(name, passes) for name, passes in passing.items())]


def _materialise(tmp_path, definitions, instance: dg.DagsterInstance, selection: str = "all"
                 ) -> dg.ExecuteInProcessResult:
    """A run of the table and its checks on partition p ("all"), of the table alone ("table") or of its checks
    alone ("checks")."""
    table, *checks = definitions
    chosen = {"all": dg.AssetSelection.assets(table), "table": dg.AssetSelection.assets(table).without_checks(),
              "checks": dg.AssetSelection.checks_for_assets(table)}[selection]
    job = dg.define_asset_job(f"run_{selection}", selection=chosen)
    merged = dg.Definitions(assets=[table], asset_checks=checks, jobs=[job],
                            resources={"home": DshHome(home=str(tmp_path))})
    return merged.resolve_job_def(job.name).execute_in_process(instance=instance, raise_on_error=False,
                                                                tags={"dagster/partition": "p"})


def _latest_run(tmp_path) -> str:
    return DshHome(home=str(tmp_path)).records().latest("table", "p").run_id


def test_each_checks_outcome_is_recorded_against_the_materialisation_it_checked(tmp_path):
    definitions = _graph({"passes": True, "fails": False, "raises": None})
    result = _materialise(tmp_path, definitions, dg.DagsterInstance.ephemeral())
    assert result.run_id == _latest_run(tmp_path)
    outcomes = check_outcomes(DshHome(home=str(tmp_path)), dg.AssetKey("table"), ["passes", "fails", "raises", "never"],
                              "p", result.run_id)
    assert outcomes == {"passes": SUCCEEDED, "fails": FAILED, "raises": EXECUTION_FAILED, "never": NOT_RUN}
    # As Dagster's own evaluations say (a check that raised has no evaluation).
    assert {e.check_name: e.passed for e in result.get_asset_check_evaluations()} == {"passes": True, "fails": False}


def test_a_materialisation_its_checks_did_not_run_on_has_no_outcomes(tmp_path):
    definitions = _graph({"passes": True})
    instance = dg.DagsterInstance.ephemeral()
    checked = _materialise(tmp_path, definitions, instance)
    again = _materialise(tmp_path, definitions, instance, selection="table")
    assert again.run_id == _latest_run(tmp_path) != checked.run_id
    home = DshHome(home=str(tmp_path))
    assert check_outcomes(home, dg.AssetKey("table"), ["passes"], "p", again.run_id) == {"passes": NOT_RUN}
    assert check_outcomes(home, dg.AssetKey("table"), ["passes"], "p", checked.run_id) == {"passes": SUCCEEDED}


@pytest.mark.parametrize("first, then, outcome", [(True, None, EXECUTION_FAILED), (False, True, SUCCEEDED)])
def test_the_latest_execution_on_the_materialisation_decides(tmp_path, first, then, outcome):
    """A check run again on the same materialisation replaces its outcome: one that raised after passing is not
    left saying it passed."""
    instance = dg.DagsterInstance.ephemeral()
    checked = _materialise(tmp_path, _graph({"check": first}), instance)
    _materialise(tmp_path, _graph({"check": then}), instance, selection="checks")
    assert _latest_run(tmp_path) == checked.run_id
    assert check_outcomes(DshHome(home=str(tmp_path)), dg.AssetKey("table"), ["check"], "p",
                          checked.run_id) == {"check": outcome}
