"""The report's figures, drawn with matplotlib's object interface rather than pyplot: nothing here opens a
window, and a figure that is not in pyplot's registry of open figures is freed with its last reference, also
when drawing it fails (with pyplot, a plot that raised before its ``close`` stayed open)."""

from __future__ import annotations

import io


def new_figure(width: float, height: float, columns: int = 1):
    """A figure of ``width`` x ``height`` inches and its axes (one, or a row of ``columns``)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height))
    return figure, figure.subplots(1, columns)


def png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return buffer.getvalue()


def legend_beside(axes, **options) -> None:
    """The legend right of the plot, so it never covers a point or a bar; none when nothing drawn has a label
    (an empty legend is a matplotlib warning on stderr: a run with no row-level candidate drew one)."""
    if axes.get_legend_handles_labels()[0]:
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), **options)


def nothing_drawn(axes, what: str) -> None:
    """Say in the plot why it is empty."""
    axes.text(0.5, 0.5, what, ha="center", va="center", transform=axes.transAxes)
