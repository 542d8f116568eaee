"""One asset per privacy attack, per row-level configuration x period. The attacks live in core/privacy/."""

import tempfile
from typing import Callable

import dagster as dg

from dsh_assets.core import engines
from dsh_assets.core.engines import Engine
from dsh_assets.core.evidence.metrics import ASSETS_BY_NAME, ATTACK_ASSETS
from dsh_assets.core.files import DigestBook
from dsh_assets.core.periods import previous_period
from dsh_assets.core.privacy import (
    anonymeter,
    cross_release,
    dp_audit,
    inference,
    informed_match,
    linkage,
    numeric_fingerprint,
    pairs,
    singling_out,
)
from dsh_assets.core.privacy import synthetic as synthetic_privacy
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.privacy.stats import FULL, LIGHT
from dsh_assets.core.provenance import code_version
from dsh_assets.core.release.configs import ROW_RELEASE, publishable_configs
from dsh_assets.core.release.source import distinct_apps
from dsh_assets.graph.automation import AFTER_ITS_INPUTS
from dsh_assets.graph.dp.assets import resolved_config
from dsh_assets.graph.metadata import as_metadata
from dsh_assets.graph.partitions import BY_PERIOD, PERIODS, config_and_period
from dsh_assets.graph.records import materialized
from dsh_assets.graph.release.store import stored_release, stored_release_or_none
from dsh_assets.graph.resources import ComputeEngine, DshHome, DshSecrets, Publications
from dsh_assets.graph.refusals import refusing


def release_under_test(home: DshHome, secrets: DshSecrets, config, period: str,
                       book: DigestBook) -> ReleaseUnderTest | None:
    """The stored release of (config, period) with its evaluator truth, by its path alone (the cross-release attack's
    earlier period, which this run did not materialise); None when either file is missing."""
    layout = home.layout
    source_path, released_path = layout.source(period), layout.released(config.id, period)
    if not (source_path.exists() and released_path.exists()):
        return None
    return ReleaseUnderTest.of_stored(source_path, released_path, config, home.schema(), secrets.load(), period,
                                      book)


def _cross_release(release: ReleaseUnderTest, home: DshHome, secrets: DshSecrets, period: str, _engine,
                   strength: str = ""):
    earlier = release_under_test(home, secrets, release.config, previous_period(period, home.cadence), release.book)
    apps = distinct_apps(release.source_path, release.schema)
    if _strength(home, release.config.id, strength) == LIGHT:
        return cross_release.evaluate_light(release, secrets.load(), apps, home.layout.home / "scratch",
                                            home.attacker().light_sample_size, previous_period=earlier)
    second = cross_release.make_second_release(release, secrets.load(), apps)
    return cross_release.evaluate(release, second, previous_period=earlier)


def _informed_match(release: ReleaseUnderTest, home: DshHome, secrets: DshSecrets, period: str, _engine,
                    strength: str = ""):
    return informed_match.evaluate(release, home.attacker(), _strength(home, release.config.id, strength))


class StrengthOptions(dg.Config):
    """A run's choice of the strength of the evaluations that have a light one (anonymeter, cross-release linkage,
    the informed attacker's sample): `dsh run --publish ID` asks "full" for ID, and `dsh run` "light" for a listed
    candidate after one that passes (the publication list does not try it)."""

    strength: str = ""
    """"full", "light", or empty: full for the configurations [publication] config lists, light for the others."""


def _strength(home: DshHome, config_id: str, strength: str) -> str:
    """The run's choice, else full for the configurations [publication] config lists and light for the others."""
    if strength not in ("", FULL, LIGHT):
        raise dg.Failure(f"evaluation strength {strength!r}: write {FULL!r}, {LIGHT!r} or "
                         f"nothing")
    listed = config_id in home.releases().publication.config_ids
    return strength or (FULL if listed else LIGHT)


def _limits(home: DshHome) -> dict[str, float]:
    """The gate's maxima on anonymeter's figures: the tests a full-strength evaluation narrows."""
    return home.releases().publication.maxima(anonymeter.GATE_NAMES.values())


def _anonymeter(release: ReleaseUnderTest, home: DshHome, secrets: DshSecrets, period: str, _engine,
                strength: str = ""):
    return anonymeter.evaluate(release, secrets.load(), home.attacker(),
                               distinct_apps(release.source_path, release.schema), home.layout.home / "scratch",
                               _strength(home, release.config.id, strength), home.anonymeter_python, _limits(home))


def _singling_out(release: ReleaseUnderTest, home: DshHome, secrets: DshSecrets, period: str, engine: Engine):
    return engine.singling_out(release, secrets.load(), period)


def _inference(release: ReleaseUnderTest, home: DshHome, secrets: DshSecrets, period: str, engine: Engine):
    return engine.inference(release, secrets.load(), period)


ATTACKS: dict[str, tuple[object, Callable]] = {
    "singling_out": (singling_out, _singling_out),
    "numeric_fingerprint": (numeric_fingerprint, lambda release, *_: numeric_fingerprint.evaluate(release)),
    "linkage": (linkage, lambda release, *_: linkage.evaluate(release)),
    "cross_release_linkage": (cross_release, _cross_release),
    "inference": (inference, _inference),
    "informed_match": (informed_match, _informed_match),
    "anonymeter": (anonymeter, _anonymeter),
}
"""Asset name -> (the attack's module, with its ASSUMPTIONS; how the asset runs it: (release, home, secrets,
period, engine) -> result; those of engines.ON_ENGINE_METRICS on the home's engine)."""
STRENGTH_ATTACKS = ("anonymeter", "cross_release_linkage", "informed_match")
"""The attacks with a light evaluation, whose asset takes the run's ``StrengthOptions``."""


def _build_attack_asset(name: str, released: dg.AssetsDefinition) -> dg.AssetsDefinition:
    module, run = ATTACKS[name]
    on_engine = name in engines.ON_ENGINE_METRICS
    decorated = dg.asset(name=name, partitions_def=released.partitions_def, deps=[released], group_name="privacy",
                         kinds={"duckdb", "spark"} if on_engine else {"duckdb"}, code_version=code_version(),
                         description=f"{ASSETS_BY_NAME[name].description}\n\nAssumptions: {module.ASSUMPTIONS}")

    def attacked(context, home, secrets, engine, digests, **options) -> dg.MaterializeResult:
        config_id, period = config_and_period(context.partition_key)
        stored = stored_release(home, digests, released.key, config_id, period)
        result = run(stored.under_test(home, secrets.load(), digests), home, secrets, period, engine.get(), **options)
        ran_on = {"engine": home.engine} if on_engine else {}
        return materialized(context, home, {**as_metadata(result.metadata(), result.figures()), **ran_on,
                                            **stored.provenance()})

    if name in STRENGTH_ATTACKS:
        @decorated
        def strength_attack_asset(context: dg.AssetExecutionContext, config: StrengthOptions, home: DshHome,
                                  secrets: DshSecrets, engine: ComputeEngine,
                                  digests: dg.ResourceParam[DigestBook]) -> dg.MaterializeResult:
            return attacked(context, home, secrets, engine, digests, strength=config.strength)

        return strength_attack_asset

    @decorated
    def attack_asset(context: dg.AssetExecutionContext, home: DshHome, secrets: DshSecrets,
                     engine: ComputeEngine, digests: dg.ResourceParam[DigestBook]) -> dg.MaterializeResult:
        return attacked(context, home, secrets, engine, digests)

    return attack_asset


def build_dp_synthetic_privacy_asset(release: dg.AssetsDefinition) -> dg.AssetsDefinition:
    @dg.asset(name="dp_synthetic_privacy", partitions_def=release.partitions_def, deps=[release], group_name="privacy",
              kinds={"duckdb"}, code_version=code_version(),
              description=f"{ASSETS_BY_NAME['dp_synthetic_privacy'].description}\n\nAssumptions: "
                          f"{synthetic_privacy.ASSUMPTIONS}\n\n{anonymeter.ASSUMPTIONS}")
    @refusing
    def dp_synthetic_privacy(context: dg.AssetExecutionContext, config: StrengthOptions, home: DshHome,
                             secrets: DshSecrets, digests: dg.ResourceParam[DigestBook]) -> dg.MaterializeResult:
        config_id, period = config_and_period(context.partition_key)
        stored = stored_release(home, digests, release.key, config_id, period)
        result = synthetic_privacy.evaluate(stored.source_path, home.configs()[config_id], home.schema(),
                                            secrets.load(), period, home.attacker(), home.layout.home / "scratch",
                                            _strength(home, config_id, config.strength), home.anonymeter_python,
                                            _limits(home))
        return materialized(context, home, {**as_metadata(result.metadata(), result.figures()), **stored.provenance()})

    return dp_synthetic_privacy


def build_privacy_assets(released: dg.AssetsDefinition) -> list[dg.AssetsDefinition]:
    return [_build_attack_asset(name, released) for name in ATTACK_ASSETS]


def build_pairs_asset(released: dg.AssetsDefinition) -> dg.AssetsDefinition:
    """Per period, before its publication: what an attacker holding a release the period has published already and
    another candidate gets, the evidence a further publication of the period must pass (nothing, before the first
    publication of a period)."""
    release_partitions = released.partitions_def

    @dg.asset(name="release_pairs", partitions_def=PERIODS, deps=[dg.AssetDep(released, partition_mapping=BY_PERIOD)],
              group_name="privacy", kinds={"duckdb"}, code_version=code_version(),
              automation_condition=AFTER_ITS_INPUTS,
              description=f"{ASSETS_BY_NAME['release_pairs'].description}\n\nAssumptions: {pairs.ASSUMPTIONS}")
    @refusing
    def release_pairs(context: dg.AssetExecutionContext, home: DshHome, secrets: DshSecrets,
                      publications: Publications, digests: dg.ResourceParam[DigestBook]) -> dg.MaterializeResult:
        period = context.partition_key
        published = [record.config_id for record in publications.ledger().published(period)
                     if record.kind == ROW_RELEASE]
        configs = publishable_configs(home.configs())  # a sweep's points are never published, so never paired
        candidates = {}
        # Before the period's first publication no pair decides anything: no file is hashed, no plan made (at 11M
        # rows, 52 s of the daily job went to the six candidates' digests and plans).
        for config_id in release_partitions.get_partitions_def_for_dimension("config").get_partition_keys():
            if not published or config_id not in configs:
                continue
            if (stored := stored_release_or_none(home, digests, released.key, config_id, period)) is not None:
                candidates[config_id] = stored.under_test(home, secrets.load(), digests)
        figures = {b: {a: result.figures() for a, result in by_a.items()}
                   for b, by_a in pairs.evaluate_pairs(candidates, published).items()}
        return materialized(context, home, {
            "figures": dg.MetadataValue.json({"pairs": figures}),
            "candidates": dg.MetadataValue.json(sorted(candidates)),
            "published": dg.MetadataValue.json(published),
            "assumptions": pairs.ASSUMPTIONS,
        })

    return release_pairs


def build_dp_audit_asset(dp_release: dg.AssetsDefinition) -> dg.AssetsDefinition:
    """The independent attack on a DP release (per DP configuration x period): an empirical lower bound on epsilon."""
    partitions = dp_release.partitions_def

    @dg.asset(name="dp_privacy_audit", partitions_def=partitions, deps=[dp_release], group_name="privacy",
              kinds={"numpy"}, code_version=code_version(),
              description=f"{ASSETS_BY_NAME['dp_privacy_audit'].description}\n\nAssumptions: {dp_audit.ASSUMPTIONS}")
    @refusing
    def dp_privacy_audit(context: dg.AssetExecutionContext, home: DshHome, secrets: DshSecrets,
                         digests: dg.ResourceParam[DigestBook]) -> dg.MaterializeResult:
        config_id, period = config_and_period(context.partition_key)
        stored = stored_release(home, digests, dp_release.key, config_id, period)
        config = resolved_config(home, stored)
        scratch = home.layout.home / "scratch"
        scratch.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=scratch) as workdir:
            result = dp_audit.audit_configuration(home.layout.source(period), config, home.schema(), secrets.load(),
                                                  workdir)
        metadata = as_metadata(result.metadata(), result.figures())
        metadata["table"] = dg.MetadataValue.md(f"```\n{result.table()}\n```")
        return materialized(context, home, {**metadata, **stored.provenance()})

    return dp_privacy_audit
