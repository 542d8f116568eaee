"""`dsh run`'s table without --json, from an outcome made by hand: its columns line up whatever the ids."""

from pathlib import Path

from dsh_assets.cli import _print_summary
from dsh_assets.graph.runner import PeriodOutcome, StepOutcome

LONG_ID = "c21_window_microagg10_shuffle"  # 29 characters, one more than the table's first column once was


def step(metadata: dict, figures: dict | None = None) -> StepOutcome:
    return StepOutcome(success=True, metadata=metadata, figures=figures or {}, checks={}, errors=[], seconds=1.0)


def release(rows: int, withheld: int, sha256: str) -> StepOutcome:
    return step({"rows_released": rows, "rows_withheld": withheld, "sha256": sha256},
                {"singling_out": {"singling_out_rate": 0.0},
                 "quality_groups": {"groups_kept": 9, "groups_total": 10},
                 "elina_answers": {"q1": {"same_answer": True}, "q2": {"same_answer": False}}})


def test_every_row_of_the_table_starts_each_column_where_its_header_does(capsys):
    outcome = PeriodOutcome("2026-11-20", step({"rows": 30_000, "subscribers": 6_000, "input_sha256": "ab" * 32}),
                            {"c15_window_k5_noise5": release(29_990, 10, "cd" * 32),
                             LONG_ID: release(29_000, 1_000, "ef" * 32)})
    _print_summary(outcome, Path("/home"), {"c15_window_k5_noise5": "candidate", LONG_ID: "candidate"})
    header, *rows = capsys.readouterr().out.splitlines()[1:4]
    assert [row.split()[0] for row in rows] == ["c15_window_k5_noise5", LONG_ID]
    for row in rows:
        assert row.index(" candidate ") + 1 == header.index("status"), (header, row)
        assert row.index("yes/no/no") == header.index("Q1/Q2/Q3 same"), (header, row)
        assert row.index(row.split()[-1]) == header.index("sha256"), (header, row)
    assert rows[1].split()[2:6] == ["29,000", "1,000", "0.0%", "9/10"]
