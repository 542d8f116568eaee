"""`dsh run`'s table without --json, from an outcome made by hand: its columns line up whatever the ids, and each
row shows what the gate decided on: the worst risk against its limit, the accuracy kept, the verdict."""

from pathlib import Path

from dsh_assets.cli import _print_summary
from dsh_assets.core.publication.gate import load_publication
from dsh_assets.core.release.configs import load_configs
from dsh_assets.graph.runner import PeriodOutcome, StepOutcome

LONG_ID = "c22_hour_k5_shuffle_code10_round3"  # 33 characters, more than the table's first column once was
POLICY = load_publication(None, load_configs())


def step(metadata: dict, figures: dict | None = None) -> StepOutcome:
    return StepOutcome(success=True, metadata=metadata, figures=figures or {}, checks={}, errors=[], seconds=1.0)


def release(rows: int, withheld: int, sha256: str, inference_upper: float,
            pair_error: float | None = None) -> StepOutcome:
    return step({"rows_released": rows, "rows_withheld": withheld, "sha256": sha256},
                {"singling_out": {"singling_out_rate": 0.0},
                 "anonymeter": {"anonymeter_inference_risk_upper": inference_upper,
                                "anonymeter_singling_out_risk_upper": 0.01},
                 "quality_groups": {"groups_kept": 9, "groups_total": 10, "median_quantile_error": 0.0004,
                                    "large_group_max_quantile_error": 0.0052,
                                    "large_group_max_tail_share_error_pp": 0.37,
                                    "pair_correlation_max_error": pair_error},
                 "elina_answers": {"q1": {"same_answer": True}, "q2": {"same_answer": False, "same_decision": True}}})


def test_every_row_starts_each_column_where_its_header_does_and_shows_what_the_gate_read(capsys):
    outcome = PeriodOutcome("2026-11-20", step({"rows": 30_000, "subscribers": 6_000, "input_sha256": "ab" * 32}),
                            {"c15_window_k5_noise5": release(29_990, 10, "cd" * 32, 0.08, pair_error=0.9707),
                             LONG_ID: release(29_000, 1_000, "ef" * 32, 0.04)})
    _print_summary(outcome, Path("/home"), {"c15_window_k5_noise5": "candidate", LONG_ID: "candidate"}, POLICY)
    header, *rows = capsys.readouterr().out.splitlines()[1:4]
    assert [row.split()[0] for row in rows] == ["c15_window_k5_noise5", LONG_ID]
    for row in rows:
        assert row.index(" candidate ") + 1 == header.index("status"), (header, row)
        assert row.index("yes/yes/no") == header.index("Q1/Q2/Q3"), (header, row)
        assert row.index("refused (") == header.index("gate"), (header, row)
    # the worst change of a strong pair's rank correlation, where it was measured
    assert [row[header.index("pairs"):].split()[0] for row in rows] == ["0.97", "n/a"]
    assert rows[1].split()[2:4] == ["29,000", "1,000"]
    # the privacy criterion nearest its limit, with the limit: 0.08 of 0.05 is worse than 0.01 of 0.05 or 0 of 0.001
    assert "0.0800 / 0.05 anonymeter_inference_risk_upper" in rows[0]
    assert "0.0400 / 0.05 anonymeter_inference_risk_upper" in rows[1]
    assert "0.000 / 0.005, 0.37 pp" in rows[1]


def test_a_risk_from_a_light_anonymeter_evaluation_is_marked_light(capsys):
    light = release(29_990, 10, "ab" * 32, 0.16)
    light.figures["anonymeter"]["anonymeter"] = {"strength": "light", "blocks": 1}
    full = release(29_990, 10, "cd" * 32, 0.16)
    full.figures["anonymeter"]["anonymeter"] = {"strength": "full", "blocks": 8}
    outcome = PeriodOutcome("2026-11-20", step({"rows": 30_000, "subscribers": 6_000, "input_sha256": "ab" * 32}),
                            {"c23_light": light, LONG_ID: full})
    _print_summary(outcome, Path("/home"), {"c23_light": "candidate", LONG_ID: "candidate"}, POLICY)
    header, *rows = capsys.readouterr().out.splitlines()[1:4]
    assert "0.1600 / 0.05 anonymeter_inference_risk_upper, light " in rows[0]
    assert "0.1600 / 0.05 anonymeter_inference_risk_upper " in rows[1] and ", light" not in rows[1]
    for row in rows:
        assert row.index("refused (") == header.index("gate"), (header, row)
