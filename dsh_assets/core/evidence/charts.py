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
