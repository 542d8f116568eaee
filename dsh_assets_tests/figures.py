"""Plots read back: the figures a plotting module saved, and what was drawn on their axes, for asserting a plot's
numbers and words rather than its pixels."""

from matplotlib.text import Annotation

from dsh_assets.core.evidence import charts


def keep_figures(monkeypatch, module) -> list:
    """Every figure ``module`` saves through its ``png`` from now on, in order (the PNG is still made, so what
    fails only when drawn fails the test too)."""
    figures = []

    def saved(figure) -> bytes:
        figures.append(figure)
        return charts.png(figure)

    monkeypatch.setattr(module, "png", saved)
    return figures


def bars(axes) -> dict[str, list[float]]:
    """Each labelled series of bars: its label -> the bars' values (heights, or widths of horizontal bars)."""
    return {container.get_label(): [patch.get_height() if container.orientation == "vertical" else patch.get_width()
                                    for patch in container]
            for container in axes.containers if not container.get_label().startswith("_")}


def bar_labels(axes) -> list[str]:
    """The words written on the bars (``bar_label``), series after series."""
    return [text.get_text() for text in axes.texts if isinstance(text, Annotation)]


def legend(axes) -> list[str]:
    return [text.get_text() for text in axes.get_legend().get_texts()]
