"""One asset per privacy attack, per configuration x period. The attacks live in core/attacks/."""

import tempfile
from dataclasses import dataclass
from typing import Callable

import dagster as dg
import pyarrow.parquet as pq

from dsh_assets.core.privacy import cross_release, inference, linkage, numeric_fingerprint, singling_out
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.release.configs import ReleaseConfig
from dsh_assets.core.provenance import code_version
from dsh_assets.core.release.source import distinct_apps
from dsh_assets.core.release.transform import plan_release
from dsh_assets.graph.metadata import as_metadata, not_applicable
from dsh_assets.graph.partitions import config_and_period, period_dimension, previous_period
from dsh_assets.graph.resources import DshSettings


def release_under_test(settings: DshSettings, config: ReleaseConfig, period: str) -> ReleaseUnderTest | None:
    """The stored release of (config, period) with its evaluator truth; None when either file is missing."""
    layout = settings.layout
    source_path, released_path = layout.source(period), layout.released(config.id, period)
    if not (source_path.exists() and released_path.exists()):
        return None
    schema = settings.schema()
    plan = plan_release(source_path, config, schema, pq.ParquetFile(source_path).metadata.num_rows)
    return ReleaseUnderTest(source_path, released_path, config, schema, plan.keep)


def _cross_release(release: ReleaseUnderTest, settings: DshSettings, periods: dg.PartitionsDefinition, period: str):
    previous = previous_period(periods, period)
    earlier = release_under_test(settings, release.config, previous) if previous else None
    scratch = settings.layout.home / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch) as workdir:
        apps = distinct_apps(release.source_path, release.schema)
        second = cross_release.make_second_release(release, settings.secrets(), apps, workdir)
        return cross_release.evaluate(release, second, previous_period=earlier)


@dataclass(frozen=True)
class Attack:
    name: str
    module: object
    run: Callable
    description: str


ATTACKS = (
    Attack("singling_out", singling_out, lambda release, *_: singling_out.evaluate(release),
           "Share of subscribers with a released row alone in its cell of released quasi-identifiers (exact)."),
    Attack("numeric_fingerprint", numeric_fingerprint, lambda release, *_: numeric_fingerprint.evaluate(release),
           "1,500 sampled raw rows: categorical fields plus 14 measurements to +-1% - unique and correct matches."),
    Attack("linkage", linkage, lambda release, *_: linkage.evaluate(release),
           "500 targets, one known observation; and alias chaining over three observations where an alias is released."),
    Attack("cross_release_linkage", cross_release, _cross_release,
           "Rows and aliases relinked between two independent releases of the same source, and across periods."),
    Attack("inference", inference, lambda release, *_: inference.evaluate(release),
           "Share of subscribers whose app is inferable (>= 90% of their quasi-identifier class) and correct (exact)."),
)


def _build_attack_asset(attack: Attack, released: dg.AssetsDefinition) -> dg.AssetsDefinition:
    partitions = released.partitions_def

    @dg.asset(name=attack.name, partitions_def=partitions, deps=[released], group_name="privacy",
              kinds={"duckdb"}, code_version=code_version(),
              description=f"{attack.description}\n\nAssumptions: {attack.module.ASSUMPTIONS}")
    def attack_asset(context: dg.AssetExecutionContext, settings: DshSettings) -> dg.MaterializeResult:
        config_id, period = config_and_period(partitions, context.partition_key)
        config = settings.configs()[config_id]
        if not isinstance(config, ReleaseConfig):
            return not_applicable("aggregate (DP) release: no released rows to attack")
        release = release_under_test(settings, config, period)
        if release is None:
            raise dg.Failure(f"release {config_id} {period} is not materialised; materialise `released` first")
        result = attack.run(release, settings, period_dimension(partitions), period)
        return dg.MaterializeResult(metadata={**as_metadata(result.metadata(), result.figures()), "applicable": True})

    return attack_asset


def build_privacy_assets(released: dg.AssetsDefinition) -> list[dg.AssetsDefinition]:
    return [_build_attack_asset(attack, released) for attack in ATTACKS]
