"""The `published` asset through the graph: the gate, quarantine, the ledger's one publication per period."""

from __future__ import annotations

import html
import json
import re

import dagster as dg
import pytest

from dsh_assets.core.publication.ledger import PublicationLedger
from dsh_assets.graph import runner
from dsh_assets.graph.partitions import release_key
from dsh_assets_tests.conftest import PERIOD, check_results, materialization_metadata, releases_text
from dsh_assets_tests.tables import sha256_file

LENIENT_GATE = """
[publication]
config = "c15_window_k5_noise5"
[publication.gate]
singling_out_rate = { max = 0.5 }
[publication.pairs]
rows_relinked_upper = { max = 1.0 }
"""


DP_GATE = """
[publication.gate.dp_counts]
audit_claim_holds = { equals = true }
replication_ok = { equals = true }
small_cells_total_error = { max = 8 }
budget_within_caps = { equals = true }
"""


def releases_file(tmp_path, publication: str):
    """The packaged configurations with another [publication] table."""
    text = re.sub(r"(?ms)^\[publication\].*", "", releases_text())
    path = tmp_path / "releases.toml"
    path.write_text(text + publication)
    return path


def refusal_of(result: dg.ExecuteInProcessResult) -> list[str]:
    for event in result.all_events:
        if event.is_step_failure and event.step_key == "published":
            return event.step_failure_data.user_failure_data.metadata["refused"].value
    raise AssertionError("the publication was not refused")


def test_the_named_candidate_is_published_once_and_recorded(tmp_path, home, source_file, build_harness):
    harness = build_harness(home, source_file, releases_file(tmp_path, LENIENT_GATE))
    harness.source()
    assert harness.release("c15_window_k5_noise5").success
    result = harness.publication()
    assert result.success
    candidate = harness.released_path("c15_window_k5_noise5")
    published = home / "published" / PERIOD / "released.parquet"
    assert sha256_file(published) == sha256_file(candidate)
    record = json.loads((home / "published" / PERIOD / "publication.json").read_text())
    assert record["config"] == "c15_window_k5_noise5" and record["sha256"] == sha256_file(published)
    [entry] = PublicationLedger(home / "budget.sqlite").published(PERIOD)
    assert entry.config_id == "c15_window_k5_noise5" and entry.release_sha256 == sha256_file(published)
    shown = materialization_metadata(result, "published")["preview"]  # rows shown once every check has passed
    assert isinstance(shown, dg.TableMetadataValue) and len(shown.records) > 0
    # Publishing the same bytes again is a no-op: one ledger entry, the same file.
    assert harness.publication().success
    assert len(PublicationLedger(home / "budget.sqlite").published(PERIOD)) == 1
    # A second row-level configuration of the period is refused without --also-publish: nothing written.
    assert harness.release("c17_hour_groups_k5_noise10").success
    second = harness.publication(publish="c17_hour_groups_k5_noise10")
    assert not second.success
    assert any("second row-level release" in reason for reason in refusal_of(second))
    assert sorted(p.name for p in (home / "published" / PERIOD).iterdir()) == ["publication.json", "released.parquet"]
    assert sha256_file(published) == sha256_file(candidate)


def test_pairs_are_held_with_the_published_release_only_when_a_further_publication_is_asked(tmp_path, home,
                                                                                               source_file,
                                                                                               build_harness):
    harness = build_harness(home, source_file, releases_file(tmp_path, LENIENT_GATE))
    harness.source()
    # c20 is evaluated on request (every_period = false): once released, it is paired like the others
    for config_id in ("c15_window_k5_noise5", "c17_hour_groups_k5_noise10", "c18_window_k5_shuffle",
                      "c20_window_k5_swap5"):
        assert harness.release(config_id).success
    first = harness.publication()
    assert first.success
    nothing_yet = materialization_metadata(first, "release_pairs")
    assert nothing_yet["figures"].value == {"pairs": {}}  # nothing published yet: no pair, and no candidate read
    assert nothing_yet["candidates"].value == []
    further = harness.publication(publish="c17_hour_groups_k5_noise10", also_publish=True)
    assert further.success
    paired = materialization_metadata(further, "release_pairs")
    assert paired["candidates"].value == ["c15_window_k5_noise5", "c17_hour_groups_k5_noise10", "c18_window_k5_shuffle",
                                          "c20_window_k5_swap5"]
    pairs = paired["figures"].value["pairs"]
    # each other candidate held with the published c15 (B relinked to A): 3 pairs, not the 12 of every ordered pair
    assert {b: set(by_a) for b, by_a in pairs.items()} == {"c17_hour_groups_k5_noise10": {"c15_window_k5_noise5"},
                                                          "c18_window_k5_shuffle": {"c15_window_k5_noise5"},
                                                          "c20_window_k5_swap5": {"c15_window_k5_noise5"}}
    assert (home / "published" / PERIOD / "also" / "c17_hour_groups_k5_noise10").is_dir()


def test_a_failing_criterion_refuses_with_its_value_and_limit(tmp_path, home, source_file, build_harness):
    harness = build_harness(home, source_file, releases_file(tmp_path, LENIENT_GATE.replace(
        "singling_out_rate = { max = 0.5 }", "singling_out_rate = { max = 0.001 }\nutility_kept = { min = 0.95 }")))
    harness.source()
    assert harness.release("id_removal").success
    result = harness.publication(publish="id_removal")
    assert not result.success
    [reason] = refusal_of(result)
    value = float(re.match(r"singling_out_rate ([0-9.]+) > max 0.001$", reason).group(1))
    assert value > 0.2  # id_removal keeps the station: about a third of subscribers are alone in a cell
    assert not (home / "published").exists()
    assert PublicationLedger(home / "budget.sqlite").published(PERIOD) == []
    # What `dsh run` reports: the verdict the ledger kept for its own run, a refusal and not a crash.
    verdict = runner.run_publication(harness.defs, harness.instance, PERIOD, lambda line: None, "id_removal",
                                     also_publish=False, log_level="WARNING")
    assert (verdict.config, verdict.published, verdict.crashed, verdict.refused) == ("id_removal", False, False,
                                                                                     [reason])
    assert verdict.gate["singling_out_rate"]["value"] == pytest.approx(value, abs=1e-3)


LISTED_GATE = """
[publication]
config = ["id_removal", "c15_window_k5_noise5"]
[publication.gate]
singling_out_rate = { max = 0.001 }
anonymeter_inference_risk_upper = { max = 1.0 }
"""


def test_the_first_candidate_of_the_list_that_passes_is_published_after_those_refused(tmp_path, home, source_file,
                                                                                        build_harness):
    harness = build_harness(home, source_file, releases_file(tmp_path, LISTED_GATE))
    harness.source()
    for config_id in ("id_removal", "c15_window_k5_noise5", "c17_hour_groups_k5_noise10"):
        assert harness.release(config_id).success
    strength = {config_id: harness.defs.resources["home"].records().latest(
        "anonymeter", str(release_key(config_id, PERIOD))).values["figures"]["anonymeter"]["strength"]
        for config_id in ("id_removal", "c15_window_k5_noise5", "c17_hour_groups_k5_noise10")}
    assert strength == {"id_removal": "full", "c15_window_k5_noise5": "full", "c17_hour_groups_k5_noise10": "light"}
    sampled = {config_id: tuple(harness.defs.resources["home"].records().latest(
        attack, str(release_key(config_id, PERIOD))).values["figures"][f"{prefix}_strength"]
        for attack, prefix in (("informed_match", "informed_match"), ("cross_release_linkage", "cross_release")))
        for config_id in ("c15_window_k5_noise5", "c17_hour_groups_k5_noise10")}
    assert sampled == {"c15_window_k5_noise5": ("full", "full"), "c17_hour_groups_k5_noise10": ("light", "light")}
    verdict = runner.run_publication(harness.defs, harness.instance, PERIOD, lambda line: None, None,
                                     also_publish=False, log_level="WARNING")
    assert verdict.published and verdict.config == "c15_window_k5_noise5"
    [first, second] = verdict.considered
    assert first["config"] == "id_removal" and first["refused"][0].startswith("singling_out_rate ")
    assert second == {"config": "c15_window_k5_noise5", "refused": []}
    assert PublicationLedger(home / "budget.sqlite").published(PERIOD)[0].config_id == "c15_window_k5_noise5"
    # Named on its own, a candidate the list does not name was evaluated lightly: the gate does not decide on it
    light = runner.run_publication(harness.defs, harness.instance, PERIOD, lambda line: None,
                                   "c17_hour_groups_k5_noise10", also_publish=False, log_level="WARNING")
    assert not light.published
    assert any("anonymeter's evaluation is light" in reason for reason in light.refused)
    assert light.considered == [{"config": "c17_hour_groups_k5_noise10", "refused": light.refused}]


def test_a_candidate_holding_identifiers_is_quarantined_deleted_and_never_published(tmp_path, home, build_harness):
    """The case of the issue: a source whose province column held phone numbers, released by id_removal."""
    from dsh_assets_tests.tables import row, write

    rows = [row(f"3584000000{i:02d}", minute=10 * (i % 6), province="358401234567" if i < 3 else "Uusimaa",
                app="Gaming", value=float(i + 1)) for i in range(40)]
    source = write(tmp_path / "phones.parquet", rows)
    harness = build_harness(home, source, releases_file(tmp_path, LENIENT_GATE))
    harness.source()
    result = harness.release("id_removal", raise_on_error=False)
    assert check_results(result)["no_identifiers"] is False
    candidate = harness.released_path("id_removal")
    assert not candidate.exists(), "a candidate that failed a blocking check stayed where releases are expected"
    quarantined = home / "quarantine" / "id_removal" / PERIOD
    note = json.loads((quarantined / "quarantine.json").read_text())
    assert "no_identifiers" in note["failed_checks"]
    assert note["files"]["released.parquet"]["deleted"] and not (quarantined / "released.parquet").exists()
    refused = harness.publication(publish="id_removal")
    assert not refused.success
    assert any("quarantined: no_identifiers failed" in reason for reason in refusal_of(refused))
    assert not (home / "published").exists()


def test_a_candidate_whose_checks_did_not_run_on_it_is_not_published(tmp_path, home, source_file,
                                                                    build_storage_harness):
    harness = build_storage_harness(home, source_file, releases_file(tmp_path, LENIENT_GATE))
    harness.source()
    assert harness.release("c15_window_k5_noise5").success
    # Materialised again without its checks (as "Materialize" on the asset alone can): not a checked release.
    job = dg.define_asset_job("released_alone", selection=dg.AssetSelection.assets("released").without_checks())
    merged = dg.Definitions.merge(harness.defs, dg.Definitions(jobs=[job]))
    merged.resolve_job_def("released_alone").execute_in_process(
        instance=harness.instance, partition_key=str(release_key("c15_window_k5_noise5", PERIOD)))
    refused = harness.publication()
    assert not refused.success
    reasons = refusal_of(refused)
    assert any(reason.startswith("check checksum_drift: not run on this materialisation") for reason in reasons), reasons
    # Its checks run again on it: publishable.
    assert all(check_results(harness.released_checks_only("c15_window_k5_noise5")).values())
    assert harness.publication().success


def test_a_dp_release_passing_its_own_criteria_is_published_beside_the_periods_release(tmp_path, home, source_file,
                                                                                      build_harness):
    harness = build_harness(home, source_file, releases_file(tmp_path, LENIENT_GATE + DP_GATE))
    harness.source()
    result = harness.release("dp_counts_eps1")
    assert result.success
    recorded = materialization_metadata(result, "dp_published")
    gate = recorded["gate"].value
    assert set(gate) == {"audit_claim_holds", "replication_ok", "small_cells_total_error", "budget_within_caps"}
    assert all(criterion["ok"] for criterion in gate.values()), gate
    assert recorded["epsilon_spent"].value == pytest.approx(1.1)  # counts, Q2 and Q1's medians
    folder = home / "published" / PERIOD / "dp" / "dp_counts_eps1"
    assert sorted(p.name for p in folder.iterdir()) == ["dp_counts.parquet", "publication.json",
                                                        "q1_latency_medians.parquet", "q2_slow_5g.parquet"]
    assert sha256_file(folder / "dp_counts.parquet") == sha256_file(harness.released_path("dp_counts_eps1"))
    [entry] = PublicationLedger(home / "budget.sqlite").published(PERIOD)
    assert entry.kind == "dp_counts" and entry.path == str(folder / "dp_counts.parquet")
    # The period's row-level release is still its first: published/<period>/released.parquet, not also/.
    assert harness.release("c15_window_k5_noise5").success and harness.publication().success
    assert sorted(p.name for p in (home / "published" / PERIOD).iterdir()) == ["dp", "publication.json",
                                                                               "released.parquet"]


def test_a_dp_release_failing_its_criteria_is_refused_in_its_own_terms_its_budget_spent(tmp_path, home, source_file,
                                                                                       build_harness):
    strict = DP_GATE.replace("small_cells_total_error = { max = 8 }", "small_cells_total_error = { max = 0.5 }")
    harness = build_harness(home, source_file, releases_file(tmp_path, LENIENT_GATE + strict))
    harness.source()
    result = harness.release("dp_counts_eps1", raise_on_error=False)
    assert all(check_results(result).values())  # its checks passed: a refusal, not a fault
    [refusal] = [event.step_failure_data.user_failure_data.metadata for event in result.all_events
                 if event.is_step_failure and event.step_key == "dp_published"]
    [reason] = refusal["refused"].value
    assert re.fullmatch(r"small_cells_total_error [0-9.]+ > max 0.5", reason), reason
    assert refusal["epsilon_spent"].value == pytest.approx(1.1)
    ledger = PublicationLedger(home / "budget.sqlite")
    assert not (home / "published").exists() and ledger.published(PERIOD) == []
    kept = ledger.refusals_of_run(result.run_id)["dp_published"]  # the verdict `dsh run` reports
    assert (kept.config_id, kept.period, kept.reasons) == ("dp_counts_eps1", PERIOD, [reason])
    assert kept.epsilon_spent == pytest.approx(1.1) and kept.gate == refusal["gate"].value

    assert runner.launch_report(harness.defs, harness.instance, PERIOD).success
    page = (home / "reports" / PERIOD / "report.html").read_text()
    assert html.escape(reason) in page and "epsilon 1.1 spent all the same" in page
    assert "not measured" not in page  # no row-level criterion is asked of it
