"""What `dsh run --json` and `dsh sweep --json` print: the runner's typed outcomes as plain values.

The keys are the command's interface (scripts and schedulers read them), so they are built in one place
from the outcomes, with what is read back after the run: each candidate's status, the budget's state.
"""

from __future__ import annotations

from dsh_assets.core.publication.gate import PublicationPolicy, frontier_point
from dsh_assets.graph.resources import DshHome, resources_for
from dsh_assets.graph.runner import PeriodOutcome, Publication, StepOutcome

PAIR_KEYS = ("rows_relinked", "rows_relinked_ci", "combined_singling_out_rate")
"""The pair evidence a release's entry carries against each other candidate of the period."""
RELEASE_KEYS = ("path", "sha256", "content_sha256", "engine", "rows_in", "rows_released", "rows_withheld", "seed_id")
"""What a release's materialisation recorded that its entry repeats."""


def budget_after(home: DshHome, period: str) -> dict | None:
    """The ledger's status of the period, read after every debit of the run; None without a ledger."""
    return resources_for(home)["ledger"].ledger().status(period) if home.layout.ledger.is_file() else None


def run_json(outcome: PeriodOutcome, statuses: dict[str, str], budget: dict | None) -> dict:
    """The source, each release with its evidence, status and pairs, the publication, the report."""
    source = outcome.source.metadata
    pairs = ((outcome.publication.step.figures.get("release_pairs") or {}).get("pairs") or {}
             if outcome.publication else {})
    return {
        "period": outcome.period,
        "source": {"path": source.get("path"), "sha256": source.get("input_sha256"),
                   "stored_sha256": source.get("sha256"), "rows": source.get("rows"),
                   "subscribers": source.get("subscribers"), "ok": outcome.source.success,
                   "errors": outcome.source.errors},
        "releases": {config_id: _release_json(step, statuses[config_id], pairs.get(config_id) or {}, budget)
                     for config_id, step in outcome.releases.items()},
        "publication": _publication_json(outcome.publication),
        "report": {"path": outcome.report_path},
    }


def _release_json(step: StepOutcome, status: str, pairs: dict, budget: dict | None) -> dict:
    """One release's entry; a DP release's `budget` is the ledger's after the run (``budget``), not the figure its
    release recorded before the run's later debits, and `publication` its own verdict."""
    recorded = {key: step.metadata.get(key) for key in RELEASE_KEYS}
    entry = {**recorded, "checks": step.checks, "ok": step.success, "errors": step.errors,
             **step.evidence.with_budget(budget).as_json(),
             "status": status,
             "pairs": {other: {key: figures.get(key) for key in PAIR_KEYS} for other, figures in sorted(pairs.items())}}
    if step.own_publication is not None:
        entry["publication"] = step.own_publication.as_json()
    return entry


def _publication_json(publication: Publication | None) -> dict:
    if publication is None:
        return {"config": None, "published": False, "path": None, "sha256": None, "refused": [], "gate": {},
                "considered": []}
    meta = publication.step.metadata if publication.published else {}
    return {"config": publication.config, "published": publication.published, "path": meta.get("path"),
            "sha256": meta.get("sha256"), "refused": publication.refused, "gate": publication.gate,
            "considered": publication.considered}


def sweep_json(outcome: PeriodOutcome, configs: dict, policy: PublicationPolicy) -> dict:
    """Each point as the frontier shows it (its sweep, operations, figures and the gate's verdict), the report."""
    candidates = {config_id: {"sweep": configs[config_id].sweep, "operations": configs[config_id].operations(),
                              "ok": step.success, **frontier_point(policy, step.evidence, [
                                  *(f"check {name} failed" for name, ok in step.checks.items() if not ok),
                                  *step.errors])}
                  for config_id, step in outcome.releases.items()}
    return {"period": outcome.period, "candidates": candidates, "report": {"path": outcome.report_path}}
