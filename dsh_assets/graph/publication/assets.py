"""The period's publication: one gated release, recorded in the publication ledger, copied where analysts look.

Every configuration's release of a period is a candidate under `candidates/`. `published`
(period partitions) takes the configuration the DPO named (`[publication] config`, or the run tag
`dsh/publish`), refuses unless the candidate is on disk as recorded, every blocking check of it
passed, its evidence scored these very bytes and every gate criterion holds; then records it in
the publication ledger (which refuses a second row-level publication of the same source and period
unless `dsh/also-publish` is set and the pair's evidence passes `[publication.pairs]`) and copies it
atomically to `published/<period>/`. A refusal writes nothing and names every reason.
"""

import dagster as dg

from dsh_assets.core.evidence.metrics import RELEASE_ASSET
from dsh_assets.core.provenance import code_version
from dsh_assets.core.publication.gate import check_pair
from dsh_assets.core.publication.ledger import PublicationRefused
from dsh_assets.core.publication.publish import CandidateChanged, publish_candidate
from dsh_assets.core.release.configs import ROW_RELEASE
from dsh_assets.graph.automation import AFTER_ITS_INPUTS
from dsh_assets.graph.evidence.gather import candidate
from dsh_assets.graph.history import recorded_metadata
from dsh_assets.graph.metadata import preview
from dsh_assets.graph.partitions import BY_PERIOD, PERIODS, release_key
from dsh_assets.graph.resources import DshHome, Publications

PUBLISH_TAG = "dsh/publish"
ALSO_PUBLISH_TAG = "dsh/also-publish"


def refusal(period: str, config_id: str | None, reasons: list[str], gate: dict | None = None) -> dg.Failure:
    """A refused publication: a Failure whose metadata names every reason (read back by `dsh run`)."""
    return dg.Failure(
        description=f"publication of {config_id or 'no configuration'} for {period} refused: " + "; ".join(reasons),
        metadata={"config": config_id or "", "refused": dg.MetadataValue.json(reasons),
                  "gate": dg.MetadataValue.json(gate or {})},
        allow_retries=False,
    )


def _pair_refusals(context, home: DshHome, pairs_key: dg.AssetKey, policy, config_id: str, earlier) -> list[str]:
    """Why an additional row-level publication of the period is refused: each earlier one's pair evidence."""
    recorded = recorded_metadata(context.instance, pairs_key, context.partition_key, limit=1)
    pairs = ((recorded[0].get("figures") or {}).get("pairs") or {}) if recorded else {}
    reasons = []
    for record in earlier:
        figures = (pairs.get(config_id) or {}).get(record.config_id)
        if figures is None:
            reasons.append(f"no pair evidence of {config_id} against the published {record.config_id}")
            continue
        _, failed = check_pair(policy, figures)
        reasons += [f"against the published {record.config_id}: {reason}" for reason in failed]
    return reasons


def build_published_asset(per_release_assets, pairs_asset: dg.AssetsDefinition | None,
                          check_names: dict[str, tuple[str, ...]]) -> dg.AssetsDefinition:
    deps = [dg.AssetDep(asset, partition_mapping=BY_PERIOD) for asset in per_release_assets]
    deps += [pairs_asset] if pairs_asset is not None else []

    @dg.asset(name="published", partitions_def=PERIODS, deps=deps, group_name="publication",
              kinds={"parquet"}, code_version=code_version(), automation_condition=AFTER_ITS_INPUTS,
              description="The period's one published release: the configuration the DPO named, if every "
                          "blocking check of its candidate passed and every criterion of the release gate holds; "
                          "recorded in the publication ledger and copied to published/<period>/.")
    def published(context: dg.AssetExecutionContext, home: DshHome, publications: Publications) -> dg.MaterializeResult:
        period = context.partition_key
        configs = home.configs()
        policy = publications.policy(configs)
        config_id = context.run.tags.get(PUBLISH_TAG) or policy.config_id
        if not config_id:
            raise refusal(period, None, ["no configuration is named for publication ([publication] config)"])
        if config_id not in configs:
            raise refusal(period, config_id, [f"unknown configuration; known: {', '.join(configs)}"])
        config = configs[config_id]
        verdict = candidate(context.instance, home, policy, config, period, check_names)
        if not verdict.publishable:
            raise refusal(period, config_id, verdict.refused, verdict.gate)

        ledger = publications.ledger()
        released = verdict.released
        also = context.run.tags.get(ALSO_PUBLISH_TAG) == "true"
        row_level_earlier = [r for r in ledger.row_level(released["source_sha256"], period) if r.config_id != config_id]
        if also and row_level_earlier and config.kind == ROW_RELEASE and pairs_asset is not None:
            reasons = _pair_refusals(context, home, pairs_asset.key, policy, config_id, row_level_earlier)
            if reasons:
                raise refusal(period, config_id, reasons, verdict.gate)
        lineage = {"candidate": {"asset": RELEASE_ASSET[config.kind], "partition": str(release_key(config_id, period)),
                                 "sha256": released["sha256"]},
                   "source": {"sha256": released["source_sha256"]}}
        note = {"seed_id": released["seed_id"], "code_version": released["code_version"], "gate": verdict.gate,
                "lineage": lineage}
        try:
            record = publish_candidate(home.layout, ledger, config_id, config.kind, period, released["sha256"],
                                       released["source_sha256"], note, also_publish=also)
        except (PublicationRefused, CandidateChanged) as refused:
            raise refusal(period, config_id, [str(refused)], verdict.gate) from None
        target = record.path
        context.log.info(f"published {config_id} for {period} at {target}")
        return dg.MaterializeResult(
            data_version=dg.DataVersion(released["sha256"]),
            metadata={"config": config_id, "kind": config.kind, "sha256": released["sha256"],
                      "path": dg.MetadataValue.path(str(target)), "source_sha256": released["source_sha256"],
                      "seed_id": released["seed_id"], "code_version": code_version(),
                      "published_at": record.published_at, "also_publish": record.also_publish,
                      "ledger_publication": record.id, "gate": dg.MetadataValue.json(verdict.gate),
                      "lineage": dg.MetadataValue.json({**lineage, "ledger": {"publication": record.id}}),
                      "preview": preview(target)},
        )

    return published
