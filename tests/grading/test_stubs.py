"""The release's stubs name the function a student writes (kvcourse_grader.stubs)."""

from __future__ import annotations

from kvcourse_grader.stubs import PLAIN_STUB, is_stub_line, named_stubs

CELL = '''class MyBlockTable:
    def __init__(self, pool):
        """An empty table."""
        # YOUR CODE HERE
        raise NotImplementedError()

    @property
    def num_tokens(self) -> int:
        # YOUR CODE HERE
        raise NotImplementedError()


def helper(x):
    def inner(y):
        return y

    # YOUR CODE HERE
    raise NotImplementedError()


# YOUR CODE HERE
raise NotImplementedError()'''


def test_each_stub_in_a_function_names_it_and_one_outside_stays_plain():
    lines = named_stubs(CELL).split("\n")
    raises = [line for line in lines if "NotImplementedError" in line]
    assert raises == [
        '        raise NotImplementedError("write MyBlockTable.__init__ here")',
        '        raise NotImplementedError("write MyBlockTable.num_tokens here")',
        '    raise NotImplementedError("write helper here")',
        PLAIN_STUB,
    ]
    assert len(lines) == len(CELL.split("\n"))
    assert all(is_stub_line(line) for line in raises)
    assert not is_stub_line("raise NotImplementedError(f'{x}')") and not is_stub_line("x = 1")
    compile("\n".join(lines), "<release>", "exec")
