"""What a period's candidates recorded and how their checks went (the record store), and the gate's verdict."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import dagster as dg

from dsh_assets.core.evidence.metrics import RELEASE_ASSET, Evidence, assets_of_kind
from dsh_assets.core.files import DigestBook
from dsh_assets.core.records import Record
from dsh_assets.core.publication.gate import PublicationPolicy, check_candidate
from dsh_assets.core.publication.quarantine import quarantine_note
from dsh_assets.graph.partitions import release_key
from dsh_assets.graph.records import SUCCEEDED, check_outcomes
from dsh_assets.graph.resources import DshHome

CANDIDATE, PUBLISHED, QUARANTINED, MISSING = "candidate", "published", "quarantined", "missing"


def recorded_evidence(home: DshHome, config, period: str) -> dict[str, Record]:
    """Asset name -> latest record of one configuration and period, for its release asset and each evidence asset
    of its kind (those never materialised on the partition are left out)."""
    partition = str(release_key(config.id, period))
    records = {name: home.records().latest(name, partition) for name in assets_of_kind(config.kind)}
    return {name: record for name, record in records.items() if record is not None}


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
    release_asset: str
    records: dict[str, Record]
    """Asset name -> latest record, of the release asset and of each evidence asset of its kind."""
    evidence: Evidence
    checks: dict[str, str] = field(default_factory=dict)
    gate: dict = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    """Why it cannot be published: failed checks, quarantine, failed criteria. Empty: publishable."""

    @property
    def released(self) -> dict:
        """The release asset's recorded values (empty when never materialised)."""
        record = self.records.get(self.release_asset)
        return record.values if record else {}

    @property
    def publishable(self) -> bool:
        return self.status == CANDIDATE and not self.refused


def candidate(home: DshHome, book: DigestBook, policy: PublicationPolicy, config,
              period: str, check_names: dict[str, tuple[str, ...]], budget: dict | None = None) -> Candidate:
    """The candidate of (config, period) with its checks and the verdict of its kind's gate.

    ``check_names``: release kind -> the blocking checks of its release asset. ``budget``: the ledger's
    status of the period now, which replaces what a DP release recorded when its tables were drawn (a
    later table of the period, Q1's medians, is debited after that). Publishable only when the file on
    disk is the recorded one, every blocking check's latest execution on the partition succeeded, the
    evidence scored these very bytes, and every gate criterion holds.
    """
    release_asset = RELEASE_ASSET[config.kind]
    records = recorded_evidence(home, config, period)
    evidence = Evidence.of_assets({name: record.values.get("figures") or {} for name, record in records.items()}
                                  ).with_budget(budget)
    found = functools.partial(Candidate, config.id, release_asset=release_asset, records=records, evidence=evidence)
    path = home.layout.released(config.id, period)
    note = quarantine_note(home.layout, config.id, period)
    if release_asset not in records:
        return found(MISSING, refused=[f"{config.id} has no release for {period}"])
    released = records[release_asset]
    if not path.is_file() or book.sha256(path) != released.values["sha256"]:
        if note:
            reasons = [f"quarantined: {check} failed ({problem})" for check, problem in note["failed_checks"].items()]
            return found(QUARANTINED, refused=reasons)
        return found(MISSING, refused=[f"{path} is missing or differs from its recorded SHA-256"])
    checks = check_outcomes(home, dg.AssetKey(release_asset), check_names[config.kind], released.partition,
                            released.run_id)
    refused = [f"check {name}: {status}" for name, status in checks.items() if status != SUCCEEDED]
    scored = {name: record.values.get("release_sha256") for name, record in records.items() if name != release_asset}
    stale = sorted(name for name, sha in scored.items() if sha not in (None, released.values["sha256"]))
    refused += [f"evidence {name} scored another release than the one on disk; re-materialise it" for name in stale]
    gate, failed = check_candidate(policy, evidence, config.kind)
    return found(CANDIDATE, checks=checks, gate=gate, refused=refused + failed)


def candidates(home: DshHome, book: DigestBook, policy: PublicationPolicy,
               period: str, check_names: dict[str, tuple[str, ...]], budget: dict | None = None
               ) -> dict[str, Candidate]:
    return {config_id: candidate(home, book, policy, config, period, check_names, budget)
            for config_id, config in home.configs().items()}
