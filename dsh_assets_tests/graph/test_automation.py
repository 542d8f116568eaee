"""Under the daemon, what follows a release materialised on its own, tick by tick (Dagster's condition evaluator
on an ephemeral instance; materialisations are reported, not computed: this tests the conditions, not the assets).

The period's assets must wait for the evidence they read: not be launched beside it on the tick that requests it.
"""

import dagster as dg
import pytest

from dsh_assets.graph.partitions import PERIODS, register_period, release_key
from dsh_assets_tests.conftest import PERIOD, make_defs

CONFIG = "c15_window_k5_noise5"
PERIOD_ASSETS = ("release_pairs", "published", "scorecard", "release_report")


@pytest.fixture
def instance():
    """Ephemeral only: the conditions' evaluation does not depend on the storage (the graph's PostgreSQL runs
    cover that), and on PostgreSQL the same ticks take fifteen times longer."""
    with dg.DagsterInstance.ephemeral() as ephemeral:
        yield ephemeral


def partitions_of(asset: dg.AssetsDefinition, config_id: str | None = None) -> list[str]:
    """The asset's partitions of PERIOD (of one configuration where given)."""
    if asset.partitions_def == PERIODS:
        return [PERIOD]
    configs = asset.partitions_def.get_partitions_def_for_dimension("config").get_partition_keys()
    return [str(release_key(config, PERIOD)) for config in configs if config_id in (None, config)]


def report(instance: dg.DagsterInstance, assets) -> None:
    for asset in assets:
        for partition in partitions_of(asset, CONFIG):
            instance.report_runless_asset_event(dg.AssetMaterialization(asset.key, partition=partition))


def requested(result) -> set[str]:
    return {key.path[0] for key in result._requested_partitions_by_asset_key if result.get_num_requested(key)}


def test_a_release_is_followed_by_its_evidence_then_its_periods_assets_then_the_report(home, instance):
    defs = make_defs(home)
    partitioned = {asset.key.path[0]: asset for asset in defs.assets
                   if isinstance(asset, dg.AssetsDefinition) and asset.partitions_def is not None}
    register_period(instance, PERIOD)
    for asset in partitioned.values():
        for partition in partitions_of(asset):
            instance.report_runless_asset_event(dg.AssetMaterialization(asset.key, partition=partition))
    cursor = dg.evaluate_automation_conditions(defs, instance).cursor

    report(instance, [partitioned["released"]])
    first = dg.evaluate_automation_conditions(defs, instance, cursor=cursor)
    evidence = {name for name, asset in partitioned.items()
                if name not in PERIOD_ASSETS and name != "released" and asset.partitions_def != PERIODS
                and "released" in {key.path[0] for key in asset.dependency_keys}}
    assert evidence and requested(first) == evidence | {"release_pairs"}
    assert first.get_requested_partitions(dg.AssetKey("singling_out")) == {str(release_key(CONFIG, PERIOD))}

    report(instance, [partitioned[name] for name in evidence | {"release_pairs"}])
    second = dg.evaluate_automation_conditions(defs, instance, cursor=first.cursor)
    assert requested(second) == {"published", "scorecard"}

    report(instance, [partitioned["published"], partitioned["scorecard"]])
    third = dg.evaluate_automation_conditions(defs, instance, cursor=second.cursor)
    assert requested(third) == {"release_report"}

    report(instance, [partitioned["release_report"]])
    assert dg.evaluate_automation_conditions(defs, instance, cursor=third.cursor).total_requested == 0
