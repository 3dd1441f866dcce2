"""The text below a figure's panels, laid out so that no text overlaps: one legend for all panels above the note,
each measured with the figure's renderer, the note wrapped to the figure's width, and the panels fitted above
both (tight_layout keeps their titles, labels and tick labels apart)."""

import textwrap
from typing import Any

NOTE_SIZE = 6
LEGEND_SIZE = 6
PAD = 0.01  # figure fraction between the boxes
WIDTH_USED = 0.92  # of the figure's width, for the note and the legend: other renderers set text a little wider
MAX_LEGEND_COLUMNS = 4


def finish(fig, lines: list[str]) -> None:
    """Lay out `fig`: its note (`lines`, wrapped) at the bottom, one legend of every panel's labelled artists above
    it, the panels above the legend."""
    renderer = fig.canvas.get_renderer()
    bottom = PAD
    if lines:
        note = _note(fig, lines, renderer)
        bottom = _top(fig, note, renderer) + PAD
    handles, labels = _unique_handles(fig)
    if handles:
        legend = _legend(fig, handles, labels, bottom, renderer)
        bottom = _top(fig, legend, renderer) + PAD
    fig.tight_layout(rect=(0, bottom, 1, 1))


def _top(fig, artist, renderer) -> float:
    """The top of an artist's box, in figure fraction."""
    return artist.get_window_extent(renderer).y1 / fig.bbox.height


def _fits(fig, artist, renderer) -> bool:
    return artist.get_window_extent(renderer).width <= WIDTH_USED * fig.bbox.width


def _note(fig, lines: list[str], renderer):
    """The note, each line wrapped to the widest column count that fits the figure's width."""
    columns = int(fig.bbox.width / (NOTE_SIZE * fig.dpi / 72 * 0.45))  # a generous first guess, narrowed below
    while True:
        text = "\n".join(textwrap.fill(line, columns) for line in lines)
        note = fig.text(PAD, PAD, text, fontsize=NOTE_SIZE, ha="left", va="bottom")
        if _fits(fig, note, renderer) or columns <= 20:
            return note
        note.remove()
        columns = int(columns * 0.95)


def _unique_handles(fig) -> tuple[list, list]:
    """Every panel's labelled artists, each label once, in the order first drawn."""
    seen: dict[str, Any] = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    return list(seen.values()), list(seen)


def _legend(fig, handles, labels, bottom: float, renderer):
    """One legend for the figure, centred above `bottom`, in as many columns (up to 4) as fit its width."""
    for columns in range(min(MAX_LEGEND_COLUMNS, len(handles)), 0, -1):
        legend = fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, bottom), ncol=columns,
                            frameon=False, fontsize=LEGEND_SIZE, borderaxespad=0)
        if _fits(fig, legend, renderer) or columns == 1:
            return legend
        legend.remove()
