"""What the instance recorded for a period's candidates: their figures, their checks, and the gate's verdict."""

from __future__ import annotations

from dataclasses import dataclass, field

import dagster as dg

from dsh_assets.core.evidence.metrics import BUDGET, RELEASE_ASSET, assets_of_kind, evidence_from_figures
from dsh_assets.core.files import sha256_file
from dsh_assets.core.publication.gate import PublicationPolicy, check_candidate
from dsh_assets.core.publication.quarantine import quarantine_note
from dsh_assets.graph.history import latest_check_outcomes, recorded_metadata
from dsh_assets.graph.partitions import release_key
from dsh_assets.graph.resources import DshHome

CANDIDATE, PUBLISHED, QUARANTINED, MISSING = "candidate", "published", "quarantined", "missing"


def recorded_evidence(instance: dg.DagsterInstance, config, period: str) -> tuple[dict, dict[str, dict]]:
    """(the latest metadata of the release asset, asset name -> latest metadata) of one configuration and period."""
    key = str(release_key(config.id, period))
    release_asset, *_ = names = assets_of_kind(config.kind)
    latest = {}
    for name in names:
        history = recorded_metadata(instance, dg.AssetKey(name), key, limit=1)
        if history:
            latest[name] = history[0]
    return latest.get(release_asset, {}), latest


CODE_VERSION_TAG = "dagster/code_version"


def recorded_origins(instance: dg.DagsterInstance, asset_names, partition_key: str) -> dict[str, dict]:
    """Asset name -> where its latest recorded figures come from: the asset, the partition, the code version
    of the materialisation and its run (assets never materialised on the partition are left out)."""
    origins = {}
    for name in asset_names:
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey(name), asset_partitions=[str(partition_key)]), limit=1).records
        if records and records[0].asset_materialization is not None:
            tags = records[0].asset_materialization.tags or {}
            origins[name] = {"asset": name, "partition": str(partition_key),
                             "code_version": tags.get(CODE_VERSION_TAG), "run_id": records[0].run_id}
    return origins


def answer_details(recorded: dict) -> dict:
    """The numbers behind Elina's answers as `elina_answers` records them (latencies, shares, stations)."""
    keys = ("q1_base_gaming_ms", "q1_base_streaming_ms", "q1_release_gaming_ms", "q1_release_streaming_ms",
            "q2_base_shares", "q2_release_shares", "q2_slow_threshold", "q3_base", "q3_release", "q3_rule")
    return {key: recorded.get(key) for key in keys if recorded.get(key) not in (None, "n/a")}


@dataclass
class Candidate:
    """One configuration's release of a period, as the gate sees it."""

    config_id: str
    status: str
    """"candidate" (on disk as recorded), "quarantined" (a blocking check failed), or "missing"."""
    released: dict
    """The release asset's latest metadata (empty when never materialised)."""
    evidence: dict
    checks: dict[str, str] = field(default_factory=dict)
    gate: dict = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    """Why it cannot be published: failed checks, quarantine, failed criteria. Empty: publishable."""

    @property
    def publishable(self) -> bool:
        return self.status == CANDIDATE and not self.refused


def candidate(instance: dg.DagsterInstance, home: DshHome, policy: PublicationPolicy, config, period: str,
              check_names: dict[str, tuple[str, ...]], budget: dict | None = None) -> Candidate:
    """The candidate of (config, period) with its checks and the verdict of its kind's gate.

    ``check_names``: release kind -> the blocking checks of its release asset. ``budget``: the ledger's
    status of the period now, which replaces what a DP release recorded when its tables were drawn (a
    later table of the period, Q1's medians, is debited after that). Publishable only when the file on
    disk is the recorded one, every blocking check's latest execution on the partition succeeded, the
    evidence scored these very bytes, and every gate criterion holds.
    """
    released, latest = recorded_evidence(instance, config, period)
    evidence = evidence_from_figures({name: meta.get("figures") or {} for name, meta in latest.items()})
    if budget is not None and evidence.get(BUDGET) is not None:
        evidence[BUDGET] = budget
    path = home.layout.released(config.id, period)
    note = quarantine_note(home.layout, config.id, period)
    if not released:
        return Candidate(config.id, MISSING, released, evidence, refused=[f"{config.id} has no release for {period}"])
    if not path.is_file() or sha256_file(path) != released["sha256"]:
        if note:
            reasons = [f"quarantined: {check} failed ({problem})" for check, problem in note["failed_checks"].items()]
            return Candidate(config.id, QUARANTINED, released, evidence, refused=reasons)
        return Candidate(config.id, MISSING, released, evidence,
                         refused=[f"{path} is missing or differs from its recorded SHA-256"])
    asset_key = dg.AssetKey(RELEASE_ASSET[config.kind])
    checks = latest_check_outcomes(instance, asset_key, check_names[config.kind], str(release_key(config.id, period)))
    refused = [f"check {name}: {status}" for name, status in checks.items() if status != "SUCCEEDED"]
    stale = sorted(name for name, meta in latest.items()
                   if name != asset_key.path[-1] and meta.get("release_sha256") not in (None, released["sha256"]))
    refused += [f"evidence {name} scored another release than the one on disk; re-materialise it" for name in stale]
    gate, failed = check_candidate(policy, evidence, config.kind)
    return Candidate(config.id, CANDIDATE, released, evidence, checks, gate, refused + failed)


def candidates(instance: dg.DagsterInstance, home: DshHome, policy: PublicationPolicy, period: str,
               check_names: dict[str, tuple[str, ...]], budget: dict | None = None) -> dict[str, Candidate]:
    return {config_id: candidate(instance, home, policy, config, period, check_names, budget)
            for config_id, config in home.configs().items()}
