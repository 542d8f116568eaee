"""The period's publication: gated releases, recorded in the publication ledger, placed where analysts look.

Every configuration's release of a period is a candidate under `candidates/`. `published`
(period partitions) tries the row-level configurations the DPO listed (`[publication] config`, in order; or the
one the run's `PublishOptions.config_id` names) and publishes the first that is on disk as recorded, every blocking
check of which passed, whose evidence scored these very bytes and for which every gate criterion holds; it records it in
the publication ledger (which refuses a second row-level publication of the same source and period
unless the run's `also_publish` is set and the pair's evidence passes `[publication.pairs]`) and places it
atomically under `published/<period>/`. `dp_published` (DP configuration x period) does the same for
each DP count release, on its own criteria (`[publication.gate.dp_counts]`), beside the period's
release. A refusal writes nothing and names every reason.
"""

from pathlib import Path

import dagster as dg

from dsh_assets.core.evidence.metrics import RELEASE_ASSET, published_as
from dsh_assets.core.files import DigestBook
from dsh_assets.core.provenance import code_version
from dsh_assets.core.publication.gate import check_pair
from dsh_assets.core.publication.ledger import PublicationLedger, PublicationRefused
from dsh_assets.core.publication.publish import CandidateChanged, publish_candidate
from dsh_assets.core.release.configs import ROW_RELEASE
from dsh_assets.graph.automation import AFTER_ITS_INPUTS
from dsh_assets.graph.evidence.gather import candidate
from dsh_assets.graph.metadata import preview
from dsh_assets.graph.partitions import BY_PERIOD, PERIODS, config_and_period, release_key
from dsh_assets.graph.records import materialized, recorded
from dsh_assets.graph.resources import BudgetLedger, DshHome, Publications
from dsh_assets.graph.refusals import refusing

DP_PUBLISHED = "dp_published"


class PublishOptions(dg.Config):
    """A run's choice for the period's publication (`dsh run --publish ID --also-publish`)."""

    config_id: str = ""
    """The row-level configuration to publish; empty: the first of the policy's `[publication] config` that
    passes."""
    also_publish: bool = False
    """Publish it beside the period's earlier row-level publication, if the pair's evidence passes."""


def refusal(context: dg.AssetExecutionContext, ledger: PublicationLedger, period: str, config_id: str | None,
            reasons: list[str], gate: dict | None = None, epsilon_spent: float | None = None,
            considered: list[dict] | None = None) -> dg.Failure:
    """A refused publication: kept in the publication ledger as this run's verdict (what `dsh run` reports), and a
    Failure naming every reason for the UI; for a DP release also the epsilon its tables cost, which a refusal does
    not give back; ``considered``: each candidate of the publication list tried, with its reasons."""
    considered = considered or ([{"config": config_id, "refused": reasons}] if config_id else [])
    ledger.record_refusal(context.run.run_id, context.asset_key.to_user_string(), period, config_id or "", reasons,
                          gate or {}, epsilon_spent, considered=considered)
    spent = "" if epsilon_spent is None else f" (its tables' epsilon {epsilon_spent:g} is spent all the same)"
    metadata = {"config": config_id or "", "refused": dg.MetadataValue.json(reasons),
                "gate": dg.MetadataValue.json(gate or {}), "considered": dg.MetadataValue.json(considered)}
    if epsilon_spent is not None:
        metadata["epsilon_spent"] = epsilon_spent
    return dg.Failure(
        description=f"publication of {config_id or 'no configuration'} for {period} refused: " + "; ".join(reasons)
                    + spent,
        metadata=metadata,
        allow_retries=False,
    )


def _pair_refusals(context, home: DshHome, pairs_key: dg.AssetKey, policy, config_id: str, earlier) -> list[str]:
    """Why an additional row-level publication of the period is refused: each earlier one's pair evidence."""
    record = recorded(home, pairs_key, context.partition_key)
    pairs = ((record.values.get("figures") or {}).get("pairs") or {}) if record else {}
    reasons = []
    for record in earlier:
        figures = (pairs.get(config_id) or {}).get(record.config_id)
        if figures is None:
            reasons.append(f"no pair evidence of {config_id} against the published {record.config_id}")
            continue
        _, failed = check_pair(policy, figures)
        reasons += [f"against the published {record.config_id}: {reason}" for reason in failed]
    return reasons


def _published(context: dg.AssetExecutionContext, home: DshHome, book: DigestBook, ledger, config, period: str,
               verdict, also: bool = False, extra: dict | None = None,
               considered: list[dict] | None = None) -> dg.MaterializeResult:
    """Publish a candidate the gate let through (``core/publication/publish.py``); a refusal of the ledger, or a
    candidate changed on disk, is a refusal like the gate's."""
    released = verdict.released
    lineage = {"candidate": {"asset": RELEASE_ASSET[config.kind], "partition": str(release_key(config.id, period)),
                             "sha256": released["sha256"]},
               "source": {"sha256": released["source_sha256"]}}
    note = {"seed_id": released["seed_id"], "code_version": released["code_version"], "gate": verdict.gate,
            "lineage": lineage, **(extra or {})}
    try:
        record = publish_candidate(home.layout, ledger, config.id, published_as(config.kind), period,
                                   released["sha256"], released["source_sha256"], note, also_publish=also, book=book)
    except (PublicationRefused, CandidateChanged) as refused:
        tried = [*(considered or []), {"config": config.id, "refused": [str(refused)]}]
        raise refusal(context, ledger, period, config.id, [str(refused)], verdict.gate, considered=tried,
                      **(extra or {})) from None
    target = Path(record.path)
    context.log.info(f"published {config.id} for {period} at {target}")
    return materialized(
        context, home, data_version=dg.DataVersion(released["sha256"]),
        metadata={"config": config.id, "kind": config.kind, "sha256": released["sha256"],
                  "path": dg.MetadataValue.path(str(target)), "source_sha256": released["source_sha256"],
                  "seed_id": released["seed_id"], "code_version": code_version(),
                  "published_at": record.published_at, "also_publish": record.also_publish,
                  "ledger_publication": record.id, "gate": dg.MetadataValue.json(verdict.gate),
                  "lineage": dg.MetadataValue.json({**lineage, "ledger": {"publication": record.id}}),
                  "considered": dg.MetadataValue.json([*(considered or []), {"config": config.id, "refused": []}]),
                  "preview": preview(target), **(extra or {})},
    )


def build_published_asset(per_release_assets, pairs_asset: dg.AssetsDefinition | None,
                          check_names: dict[str, tuple[str, ...]]) -> dg.AssetsDefinition:
    deps = [dg.AssetDep(asset, partition_mapping=BY_PERIOD) for asset in per_release_assets]
    deps += [pairs_asset] if pairs_asset is not None else []

    @dg.asset(name="published", partitions_def=PERIODS, deps=deps, group_name="publication",
              kinds={"parquet"}, code_version=code_version(), automation_condition=AFTER_ITS_INPUTS,
              description="The period's one published release: the first row-level configuration of the DPO's "
                          "ordered list ([publication] config) whose candidate passed every blocking check and every "
                          "criterion of the release gate; recorded in the publication ledger and linked to "
                          "published/<period>/. Each candidate tried before it is listed with its reasons "
                          "(`considered`).")
    @refusing
    def published(context: dg.AssetExecutionContext, config: PublishOptions, home: DshHome,
                  publications: Publications, digests: dg.ResourceParam[DigestBook]) -> dg.MaterializeResult:
        period, ledger = context.partition_key, publications.ledger()
        configs = home.configs()
        policy = publications.policy()
        named = [config.config_id] if config.config_id else list(policy.config_ids)
        if not named:
            raise refusal(context, ledger, period, None,
                          ["no configuration is named for publication ([publication] config)"])
        considered, first = [], None
        for config_id in named:
            verdict, reasons = _tried(context, home, digests, policy, configs, config_id, period, check_names,
                                      config.also_publish, pairs_asset, ledger)
            if not reasons:
                return _published(context, home, digests, ledger, configs[config_id], period, verdict,
                                  config.also_publish, considered=considered)
            considered.append({"config": config_id, "refused": reasons})
            first = first or (config_id, reasons, verdict.gate if verdict else {})
        raise refusal(context, ledger, period, *first, considered=considered)

    return published


def _tried(context, home: DshHome, book: DigestBook, policy, configs: dict, config_id: str, period: str,
           check_names: dict, also: bool, pairs_asset, ledger):
    """One configuration of the publication list as the gate sees it: (its verdict, every reason it cannot be
    published; none when it can). A further row-level publication of the period (``also``) needs its pair
    evidence against each earlier one to pass."""
    if config_id not in configs:
        return None, [f"unknown configuration; known: {', '.join(configs)}"]
    named = configs[config_id]
    if published_as(named.kind) != ROW_RELEASE:
        return None, [f"a {named.kind} release is published by `{DP_PUBLISHED}` when its own criteria "
                      f"([publication.gate.{named.kind}]) hold"]
    verdict = candidate(home, book, policy, named, period, check_names)
    if not verdict.publishable:
        return verdict, verdict.refused
    earlier = [r for r in ledger.row_level(verdict.released["source_sha256"], period) if r.config_id != config_id]
    if also and earlier and pairs_asset is not None:
        return verdict, _pair_refusals(context, home, pairs_asset.key, policy, config_id, earlier)
    return verdict, []


def build_dp_published_asset(dp_release: dg.AssetsDefinition, evidence, blocking_checks: tuple[str, ...]
                             ) -> dg.AssetsDefinition:
    """`dp_published` (DP configuration x period): each DP count release published on its own criteria."""
    partitions = dp_release.partitions_def

    @dg.asset(name=DP_PUBLISHED, partitions_def=partitions, deps=[dp_release, *evidence], group_name="publication",
              kinds={"parquet"}, code_version=code_version(),
              description="A DP count release published beside the period's release (published/<period>/dp/<config>/"
                          "), if every blocking check of it passed and every criterion of [publication.gate.dp_counts] "
                          "holds: its audit, its accuracy, its budget. Its epsilon was spent when its tables were "
                          "drawn, published or not; a refusal says how much.")
    @refusing
    def dp_published(context: dg.AssetExecutionContext, home: DshHome, publications: Publications,
                     ledger: BudgetLedger, digests: dg.ResourceParam[DigestBook]) -> dg.MaterializeResult:
        config_id, period = config_and_period(context.partition_key)
        configs = home.configs()
        config, budget = configs[config_id], ledger.ledger()
        verdict = candidate(home, digests, publications.policy(), config, period,
                            {config.kind: blocking_checks}, budget=budget.status(period))
        spent = {"epsilon_spent": budget.spent(config.ledger_debits(), period)}
        if not verdict.publishable:
            raise refusal(context, publications.ledger(), period, config_id, verdict.refused, verdict.gate, **spent)
        return _published(context, home, digests, publications.ledger(), config, period, verdict, extra=spent)

    return dp_published
