"""Interactive steppers for JupyterLab readers (ipywidgets): step through §4's block-table
frames with play, back, next and a slider.

Widgets need a live kernel: on the rendered book page they would show only their saved state, so
the book shows pre-rendered frames (:func:`kvcourse.viz.block_tables.block_table_frames_figure`)
and these widgets are for readers who open the page or an assignment in JupyterLab.

>>> from kvcourse.viz.widgets import block_table_stepper
>>> stepper = block_table_stepper()  # the lecture's "Four score and seven years ago our"
>>> stepper.index, stepper.num_frames
(0, 6)

In a notebook, make ``block_table_stepper()`` the last line of a cell to show it.
"""

from __future__ import annotations

import html
import io
from collections.abc import Sequence

import ipywidgets as widgets
from matplotlib.figure import Figure

from kvcourse.viz.block_table_frames import BlockTableFrame, check_frames, four_score_frames
from kvcourse.viz.block_tables import draw_block_table_frame

__all__ = ["BlockTableStepper", "block_table_stepper", "render_frame_png"]


def render_frame_png(
    frame: BlockTableFrame, *, figsize: tuple[float, float] = (8.0, 4.0), dpi: int = 100
) -> bytes:
    """One frame drawn by :func:`kvcourse.viz.block_tables.draw_block_table` as PNG bytes (no
    pyplot)."""
    if not isinstance(frame, BlockTableFrame):
        raise TypeError(f"frame must be a BlockTableFrame, got {frame!r}")
    fig = Figure(figsize=figsize, layout="constrained")
    draw_block_table_frame(fig.add_subplot(), frame, legend=True)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight", pad_inches=0.1)
    return buffer.getvalue()


class BlockTableStepper(widgets.VBox):
    """Step through a sequence's block-table frames: play, back, a slider, next.

    Each frame is drawn with :func:`kvcourse.viz.block_tables.draw_block_table` the first time it
    is shown and kept, so stepping back and forth is instant. :attr:`index` is the frame on display;
    :meth:`show` and :meth:`step` change it from code (the slider follows).
    """

    def __init__(
        self,
        frames: Sequence[BlockTableFrame],
        *,
        figsize: tuple[float, float] = (8.0, 4.0),
        dpi: int = 100,
        interval_ms: int = 1500,
    ) -> None:
        self.frames = check_frames(frames)
        self._figsize = figsize
        self._dpi = dpi
        self._png: dict[int, bytes] = {}
        last = len(self.frames) - 1
        self.play = widgets.Play(
            value=0, min=0, max=last, step=1, interval=interval_ms, description="play"
        )
        self.slider = widgets.IntSlider(
            value=0, min=0, max=last, step=1, description="step", readout=True
        )
        widgets.jslink((self.play, "value"), (self.slider, "value"))
        self.back_button = widgets.Button(description="◀ back", layout={"width": "90px"})
        self.next_button = widgets.Button(description="next ▶", layout={"width": "90px"})
        self.back_button.on_click(lambda _button: self.step(-1))
        self.next_button.on_click(lambda _button: self.step(+1))
        self.caption = widgets.HTML()
        self.image = widgets.Image(format="png", layout={"width": "100%", "max_width": "820px"})
        self.slider.observe(self._on_slider, names="value")
        controls = widgets.HBox([self.play, self.back_button, self.slider, self.next_button])
        super().__init__([controls, self.caption, self.image])
        self._draw(0)

    @property
    def num_frames(self) -> int:
        """How many frames the stepper holds."""
        return len(self.frames)

    @property
    def index(self) -> int:
        """The frame on display (0 = after prefill)."""
        return int(self.slider.value)

    def show(self, index: int) -> None:
        """Display frame ``index`` (clamped to the valid range)."""
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"index must be an int, got {index!r}")
        self.slider.value = max(0, min(index, self.num_frames - 1))

    def step(self, delta: int) -> None:
        """Move ``delta`` frames forward (negative: back)."""
        self.show(self.index + delta)

    def _on_slider(self, change: dict) -> None:
        self._draw(int(change["new"]))

    def _draw(self, index: int) -> None:
        if index not in self._png:
            self._png[index] = render_frame_png(
                self.frames[index], figsize=self._figsize, dpi=self._dpi
            )
        frame = self.frames[index]
        self.image.value = self._png[index]
        self.caption.value = (
            f"<b>{html.escape(frame.label)}</b> &nbsp;·&nbsp; {len(frame.tokens)} tokens in "
            f"{len(frame.entries)} blocks, {frame.wasted_slots} empty slot"
            f"{'' if frame.wasted_slots == 1 else 's'}"
        )
        self.back_button.disabled = index == 0
        self.next_button.disabled = index == self.num_frames - 1


def block_table_stepper(
    frames: Sequence[BlockTableFrame] | None = None, **kwargs: object
) -> BlockTableStepper:
    """A :class:`BlockTableStepper` over ``frames``; by default the lecture's example, prefill
    and five decode steps (:func:`kvcourse.viz.block_table_frames.four_score_frames`)."""
    return BlockTableStepper(four_score_frames(5) if frames is None else frames, **kwargs)
