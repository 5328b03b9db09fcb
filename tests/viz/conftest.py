"""Helpers for the drawing tests: fresh axes without pyplot, and a real render."""

import io

import pytest
from matplotlib.figure import Figure


@pytest.fixture
def new_axes():
    """A factory: ``fig, ax = new_axes((8.0, 3.0))`` on a new pyplot-free figure."""

    def make(size=(8.0, 3.5)):
        fig = Figure(figsize=size)
        return fig, fig.add_subplot()

    return make


@pytest.fixture
def render():
    """Draw a figure for real (catches errors that only show at draw time)."""

    def draw(fig, fmt="svg"):
        fig.savefig(io.BytesIO(), format=fmt)

    return draw
