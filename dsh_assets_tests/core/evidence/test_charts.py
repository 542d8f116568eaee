"""The report's figures: made without pyplot, saved as tight PNGs, legends beside the plot, an empty plot that says
why."""

import io

import pytest
from PIL import Image

from dsh_assets.core.evidence.charts import legend_beside, new_figure, nothing_drawn, png


def test_a_figure_has_its_size_and_a_row_of_axes_and_no_pyplot_manager():
    """pyplot gives each figure it makes a manager and keeps it open until closed: these have none, so a plot that
    raises before it is saved is freed with its last reference."""
    figure, axes = new_figure(6.0, 2.0, columns=3)
    assert tuple(figure.get_size_inches()) == (6.0, 2.0) and figure.canvas.manager is None
    assert len(axes) == 3 and len({round(a.get_position().y0, 9) for a in axes}) == 1  # one row
    assert len(new_figure(4.0, 2.0)[0].axes) == 1


def test_the_png_is_cropped_to_what_is_drawn_at_110_dpi():
    figure, axes = new_figure(4.0, 2.0)
    axes.set_axis_off()  # no tick label reaches past the axes: tight is smaller than the 440 x 220 px of the figure
    image = Image.open(io.BytesIO(png(figure)))
    assert image.format == "PNG" and image.info["dpi"] == pytest.approx((110, 110), abs=0.01)
    assert image.width < 440 and image.height < 220


def test_the_legend_sits_right_of_the_plot_with_its_options():
    figure, axes = new_figure(4.0, 2.0)
    axes.plot([0, 1], [0, 1], label="c15")
    legend_beside(axes, fontsize=7)
    figure.draw_without_rendering()
    legend = axes.get_legend()
    beside, plot = legend.get_window_extent(), axes.get_window_extent()
    assert beside.x0 > plot.x1 and beside.y1 <= plot.y1  # right of the axes, from their top down
    assert [(text.get_text(), text.get_fontsize()) for text in legend.get_texts()] == [("c15", 7.0)]


def test_nothing_labelled_draws_no_legend():
    """An empty legend is a matplotlib warning on stderr."""
    _, axes = new_figure(4.0, 2.0)
    axes.plot([0, 1], [0, 1])
    legend_beside(axes)
    assert axes.get_legend() is None


def test_an_empty_plot_says_why_in_its_middle():
    _, axes = new_figure(4.0, 2.0)
    nothing_drawn(axes, "no row-level candidate")
    [text] = axes.texts
    assert text.get_text() == "no row-level candidate" and text.get_position() == (0.5, 0.5)
    assert text.get_transform() is axes.transAxes
    assert (text.get_horizontalalignment(), text.get_verticalalignment()) == ("center", "center")
