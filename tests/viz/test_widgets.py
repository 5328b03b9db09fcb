"""The JupyterLab stepper (kvcourse.viz.widgets), driven from code without a browser."""

import pytest

from kvcourse.viz import BlockTableStepper, block_table_stepper, four_score_frames, render_frame_png


def test_stepper_constructs_and_steps():
    stepper = block_table_stepper()
    assert stepper.index == 0 and stepper.num_frames == 6
    first_image, first_caption = bytes(stepper.image.value), stepper.caption.value
    assert first_image.startswith(b"\x89PNG")
    assert stepper.back_button.disabled and not stepper.next_button.disabled

    stepper.next_button.click()
    assert stepper.index == 1
    assert bytes(stepper.image.value) != first_image
    assert "fathers" in stepper.caption.value and stepper.caption.value != first_caption

    stepper.slider.value = 2  # what dragging the slider does
    assert "brought" in stepper.caption.value
    stepper.show(99)  # clamped to the last frame
    assert stepper.index == 5 and stepper.next_button.disabled
    stepper.back_button.click()
    assert stepper.index == 4
    stepper.show(0)
    assert bytes(stepper.image.value) == first_image  # cached frames are reused


def test_stepper_over_given_frames():
    stepper = BlockTableStepper(four_score_frames(1), figsize=(6.0, 3.0), dpi=50)
    assert stepper.num_frames == 2
    assert "1 empty slot" in stepper.caption.value
    stepper.step(1)
    assert "0 empty slots" in stepper.caption.value


def test_render_frame_png():
    png = render_frame_png(four_score_frames(0)[0], dpi=40)
    assert png.startswith(b"\x89PNG")
    with pytest.raises(TypeError):
        render_frame_png("frame")


def test_stepper_rejects_bad_frames():
    with pytest.raises(ValueError):
        BlockTableStepper([])
    with pytest.raises(ValueError):
        BlockTableStepper(["not a frame"])
    with pytest.raises(TypeError):
        block_table_stepper().show("1")
