"""The wiring every dashboard shares: controls in, a readout redrawn from their values.

The readout is an ``HTML`` widget whose *value* is the text: widget state is synced, so the
text of the last setting always wins, however fast a slider moves. (Printing into an
``Output`` widget from change callbacks can drop the last redraw when updates queue up —
the slider then shows one setting and the printout another.) Plots, which need an
``Output``, are drawn below the readout; the numbers a learner reads never live there.
"""
from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence

READOUT_CLASS = "ragbook-readout"


def dashboard(controls: Mapping, text: Callable[..., str], rows: Sequence | None = None,
              draw: Callable[..., None] | None = None):
    """A ``VBox`` of ``rows`` (default: one row of all ``controls``), a readout showing
    ``text(**values)`` and, with ``draw``, an ``Output`` that ``draw(**values)`` plots into;
    both are redrawn from the controls' current values whenever one of them changes."""
    import ipywidgets as W

    readout = W.HTML()
    readout.add_class(READOUT_CLASS)
    plot = W.Output() if draw is not None else None

    def update(_change=None):
        values = {name: control.value for name, control in controls.items()}
        readout.value = f"<pre>{html.escape(text(**values))}</pre>"
        if plot is not None:
            plot.clear_output(wait=True)
            with plot:
                draw(**values)

    for control in controls.values():
        control.observe(update, names="value")
    update()
    rows = list(rows) if rows is not None else [W.HBox(list(controls.values()))]
    return W.VBox(rows + [readout] + ([plot] if plot is not None else []))
