"""Reading back what a partition's materialisations recorded: what the checks and `dsh verify` compare against."""

import dagster as dg

from dsh_assets.graph.history import recorded_metadata

PARTITIONS = dg.StaticPartitionsDefinition(["a", "b"])


class Recorded(dg.Config):
    run: int


@dg.asset(partitions_def=PARTITIONS)
def table(context: dg.AssetExecutionContext, config: Recorded) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"run": config.run, "partition": context.partition_key,
                                          "lineage": dg.MetadataValue.json({"from": ["source"]})})


def _materialise(instance: dg.DagsterInstance, partition: str, run: int) -> None:
    assert dg.materialize([table], instance=instance, partition_key=partition,
                          run_config=dg.RunConfig(ops={"table": Recorded(run=run)})).success


def test_the_latest_materialisations_of_one_partition_come_newest_first_as_plain_values():
    instance = dg.DagsterInstance.ephemeral()
    for partition, run in (("a", 1), ("b", 2), ("a", 3), ("a", 4)):
        _materialise(instance, partition, run)

    newest = recorded_metadata(instance, table.key, "a")
    assert newest == [{"run": 4, "partition": "a", "lineage": {"from": ["source"]}},
                      {"run": 3, "partition": "a", "lineage": {"from": ["source"]}}]  # the default limit is two
    assert [entry["run"] for entry in recorded_metadata(instance, table.key, "a", limit=10)] == [4, 3, 1]
    assert [entry["run"] for entry in recorded_metadata(instance, table.key, "b", limit=10)] == [2]


def test_a_partition_never_materialised_has_no_history():
    instance = dg.DagsterInstance.ephemeral()
    _materialise(instance, "a", 1)
    assert recorded_metadata(instance, table.key, "b") == []
    assert recorded_metadata(instance, dg.AssetKey("never_defined"), "a") == []
