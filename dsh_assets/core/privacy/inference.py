"""Attribute inference: the application of a subscriber's observation, read off its quasi-identifier class.

Exact over the whole release by the class-majority rule; evaluator truth only counts subscribers.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dsh_assets.core import duck
from dsh_assets.core.duck import sql_identifier, sql_literal
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.privacy.singling_out import count_subscribers
from dsh_assets.core.privacy.stats import AttackResult
from dsh_assets.core.release.configs import ReleaseConfig
from dsh_assets.core.release.schema import Schema

DEFAULT_THRESHOLD = 0.9

ASSUMPTIONS = (
    "Inference of the application (exact, whole release, class-majority rule). The attacker knows "
    "an observation's quasi-identifier class: the released categorical quasi-identifiers without "
    "the application (time window as coarsened, province, radio type, and the station where the "
    "release keeps it), and wants its application as released (the app group where apps are "
    "grouped). A class is inferable when at least the threshold share (default 90%, inclusive: 9 of "
    "10 rows is inferable) of its released rows carry one application; the attacker then guesses "
    "that majority application for anyone observed in the class. A subscriber counts when at least "
    "one of their released rows lies in an inferable class and carries the majority application "
    "(correctly inferable); the rate is those subscribers over the subscribers with at least one "
    "released row. A class of one row is trivially inferable (it is also a singled-out row). "
    "Evaluator truth (which subscriber each row belongs to) is used only to count subscribers. One "
    "rule and one threshold, not every attacker: a cleverer attacker (lower threshold, "
    "measurements as extra evidence) may infer more. Exact count, so no sample, interval or "
    "baseline; where the release does not carry the application nothing is inferred."
)


@dataclass(frozen=True)
class InferenceResult(AttackResult):
    """Exact class-majority inference counts of one release (counts only, no evaluator truth)."""

    threshold: float
    subscribers_inferable: int
    subscribers_released: int
    rows_released: int
    classes: int
    inferable_classes: int
    inferable_classes_of_one_row: int
    rows_in_inferable_classes: int
    rows_correctly_inferable: int
    """Rows of inferable classes that carry the majority application."""
    class_columns: tuple[str, ...]
    app_released: bool

    @property
    def rate(self) -> float:
        if self.subscribers_released == 0:
            return 0.0
        return self.subscribers_inferable / self.subscribers_released

    def figures(self) -> dict:
        return {"inference_rate": float(self.rate)}

    def metadata(self) -> dict:
        return {
            **self.figures(),
            "threshold": float(self.threshold),
            "classes": int(self.classes),
            "inferable_classes": int(self.inferable_classes),
            "inferable_classes_of_one_row": int(self.inferable_classes_of_one_row),
            "rows_in_inferable_classes": int(self.rows_in_inferable_classes),
            "rows_correctly_inferable": int(self.rows_correctly_inferable),
            "rows_released": int(self.rows_released),
            "subscribers_inferable": int(self.subscribers_inferable),
            "subscribers_released": int(self.subscribers_released),
            "class_columns": list(self.class_columns),
            "app_released": bool(self.app_released),
            "exact": True,
            "assumptions": ASSUMPTIONS,
        }


def exact_threshold(threshold: float) -> Fraction:
    """The threshold as the decimal it was written as (0.9 is 9/10, not the binary double above it).

    Comparing counts with the binary 0.9 would call 9 of 10 rows not inferable; comparing
    top * denominator >= numerator * total in integers is exact (on every engine). The threshold
    must be above one half, so a class has at most one majority application.
    """
    if not 0.5 < threshold <= 1.0:
        raise ValueError(f"inference threshold must be in (0.5, 1], not {threshold}")
    return Fraction(repr(float(threshold)))


def class_columns(config: ReleaseConfig, schema: Schema) -> tuple[tuple[str, ...], bool]:
    """The released quasi-identifiers the attacker classes rows by (all but the application), and whether
    the release carries the application at all."""
    qis = config.released_qis(schema)
    return tuple(q for q in qis if q != schema.app), schema.app in qis


def evaluate(release: ReleaseUnderTest, threshold: float = DEFAULT_THRESHOLD) -> InferenceResult:
    """Count classes whose released rows carry one application in at least ``threshold`` of them."""
    fraction = exact_threshold(threshold)
    schema = release.schema
    classed_by, app_released = class_columns(release.config, schema)
    rows_released = int(np.count_nonzero(release.keep))
    # The class key columns; with no class column at all the whole release is one class.
    keys = ", ".join(sql_identifier(name) for name in classed_by) or "__class"
    class_select = ", ".join(sql_identifier(name) for name in classed_by) or "0 AS __class"
    with duck.connect() as connection:
        released_subscribers = count_subscribers(connection, release)
        if not app_released or rows_released == 0:
            return InferenceResult(float(threshold), 0, released_subscribers, rows_released, 0, 0, 0, 0, 0,
                                   classed_by, app_released)
        connection.execute(
            f'CREATE TEMP VIEW released AS SELECT {class_select}, "{schema.app}" AS __app, file_row_number '
            f"FROM read_parquet({sql_literal(release.released_path)}, file_row_number = true)"
        )
        connection.execute(
            f"CREATE TEMP TABLE pairs AS SELECT {keys}, __app, count(*) AS n FROM released GROUP BY {keys}, __app"
        )
        # Integer comparison top / total >= numerator / denominator (ints from Fraction, safe to inline).
        connection.execute(
            f"CREATE TEMP TABLE classes AS SELECT {keys}, total, top, __app, "
            f"top::HUGEINT * {int(fraction.denominator)} >= {int(fraction.numerator)}::HUGEINT * total AS inferable "
            f"FROM (SELECT {keys}, sum(n)::BIGINT AS total, max(n) AS top, arg_max(__app, n) AS __app "
            f"FROM pairs GROUP BY {keys})"
        )
        rows, classes, inferable, of_one, rows_in, rows_correct = connection.execute(
            "SELECT sum(total), count(*), count(*) FILTER (WHERE inferable), "
            "count(*) FILTER (WHERE inferable AND total = 1), coalesce(sum(total) FILTER (WHERE inferable), 0), "
            "coalesce(sum(top) FILTER (WHERE inferable), 0) FROM classes"
        ).fetchall()[0]
        if rows != rows_released:
            raise ValueError(f"{release.released_path}: {rows} rows, the plan keeps {rows_released}")
        inferable_subscribers = 0
        if inferable:
            # The rows that carry their inferable class's majority app: positions, then truth.
            positions = connection.execute(
                f"SELECT file_row_number FROM released "
                f"SEMI JOIN (SELECT {keys}, __app FROM classes WHERE inferable) USING ({keys}, __app)"
            ).fetchnumpy()["file_row_number"]
            inferable_subscribers = count_subscribers(connection, release, np.sort(positions.astype(np.int64)))
    return InferenceResult(
        threshold=float(threshold),
        subscribers_inferable=int(inferable_subscribers),
        subscribers_released=int(released_subscribers),
        rows_released=rows_released,
        classes=int(classes),
        inferable_classes=int(inferable),
        inferable_classes_of_one_row=int(of_one),
        rows_in_inferable_classes=int(rows_in),
        rows_correctly_inferable=int(rows_correct),
        class_columns=classed_by,
        app_released=app_released,
    )
