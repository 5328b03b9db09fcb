"""Tests for kvcourse.os_paging, the toy virtual memory of §2."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcourse.os_paging import (
    AddressSpace,
    OutOfFramesError,
    PageTableEntry,
    PhysicalMemory,
    TranslationResult,
)

PAGE = 4096


def snapshot(memory: PhysicalMemory, processes: list[AddressSpace]) -> tuple:
    """Everything observable about memory and page tables, for 'an error changed nothing' checks."""
    frames = tuple((memory.refcount(f), _contents(memory, f)) for f in range(memory.num_frames))
    tables = tuple(
        (p.name, p.exited, p.page_faults, p.cow_copies, tuple(p.page_table.items()))
        for p in processes
    )
    return memory.free_frames(), frames, tables


def _contents(memory: PhysicalMemory, frame: int) -> bytes | None:
    if memory.refcount(frame) == 0:
        return None
    return bytes(memory.read_byte(frame, i) for i in range(memory.page_size))


def check_invariants(memory: PhysicalMemory, processes: list[AddressSpace]) -> None:
    references = [0] * memory.num_frames
    for p in processes:
        if p.exited:
            assert p.page_table == {}
        for entry in p.page_table.values():
            references[entry.frame] += 1
    free = set(memory.free_frames())
    assert len(free) == memory.num_free
    assert memory.num_free + memory.num_used == memory.num_frames
    for frame in range(memory.num_frames):
        assert memory.refcount(frame) == references[frame], f"frame {frame}"
        assert (frame in free) == (references[frame] == 0), f"frame {frame} free and used"


# ---------------------------------------------------------------- translation and demand paging


def test_translate_splits_the_address_and_faults_once() -> None:
    memory = PhysicalMemory(num_frames=4, page_size=PAGE)
    a = AddressSpace(memory, "A", num_pages=8)
    first = a.translate(0x1234)
    assert first == TranslationResult(0x1234, 1, 0x234, 0, 0x234, page_fault=True, copied=False)
    again = a.translate(0x1FFF)
    assert (again.frame, again.physical_address, again.page_fault) == (0, 0xFFF, False)
    assert a.page_faults == 1 and memory.num_used == 1
    assert a.page_table == {1: PageTableEntry(0)}


def test_frames_are_handed_out_lowest_first_and_need_not_be_contiguous() -> None:
    memory = PhysicalMemory(num_frames=8, page_size=PAGE)
    a, b = AddressSpace(memory, "A"), AddressSpace(memory, "B")
    for proc, vpn in [(a, 0), (b, 0), (a, 3), (b, 2), (a, 1)]:
        proc.translate(vpn * PAGE)
    assert {v: e.frame for v, e in a.page_table.items()} == {0: 0, 1: 4, 3: 2}
    assert {v: e.frame for v, e in b.page_table.items()} == {0: 1, 2: 3}
    check_invariants(memory, [a, b])


def test_untouched_page_reads_zero_and_written_bytes_read_back() -> None:
    memory = PhysicalMemory(num_frames=2, page_size=16)
    a = AddressSpace(memory, "A", num_pages=4)
    assert a.read(5) == 0 and a.page_faults == 1
    a.write(5, 200)
    a.write(17, 7)
    assert (a.read(5), a.read(17), a.read(16)) == (200, 7, 0)


# ---------------------------------------------------------------- fork, refcounts, copy-on-write


def test_fork_shares_frames_and_marks_both_sides_copy_on_write() -> None:
    memory = PhysicalMemory(num_frames=8, page_size=PAGE)
    a = AddressSpace(memory, "A")
    a.write(0x0010, 1)
    a.write(0x2010, 2)
    child = a.fork("A2")
    assert memory.num_used == 2
    assert [memory.refcount(e.frame) for e in a.page_table.values()] == [2, 2]
    assert a.page_table == child.page_table
    assert all(e.copy_on_write for e in child.page_table.values())
    check_invariants(memory, [a, child])


def test_copy_on_write_copies_once_then_the_last_owner_writes_in_place() -> None:
    memory = PhysicalMemory(num_frames=8, page_size=PAGE)
    parent = AddressSpace(memory, "P")
    parent.write(0x10, 11)
    child = parent.fork()
    shared = parent.page_table[0].frame

    result = child.write(0x10, 22)
    assert result.copied and not result.page_fault and result.frame != shared
    assert (parent.read(0x10), child.read(0x10)) == (11, 22)
    assert memory.refcount(shared) == 1 and child.cow_copies == 1

    result = parent.write(0x10, 33)
    assert not result.copied and result.frame == shared
    assert parent.page_table[0] == PageTableEntry(shared, copy_on_write=False)
    assert (parent.read(0x10), child.read(0x10)) == (33, 22)
    check_invariants(memory, [parent, child])


@pytest.mark.parametrize("n", [1, 2, 4, 7])
def test_n_sharers_writing_one_page_make_n_minus_1_copies(n: int) -> None:
    memory = PhysicalMemory(num_frames=n + 1, page_size=64)
    parent = AddressSpace(memory, "P", num_pages=2)
    parent.write(0, 1)
    sharers = [parent] + [parent.fork(f"S{i}") for i in range(1, n)]
    copies = sum(p.write(1, 9).copied for p in sharers)
    assert copies == n - 1
    check_invariants(memory, sharers)


def test_reading_a_shared_page_copies_nothing() -> None:
    memory = PhysicalMemory(num_frames=2, page_size=64)
    a = AddressSpace(memory, "A", num_pages=2)
    a.write(3, 5)
    b = a.fork()
    assert b.read(3) == 5 and memory.num_used == 1 and b.cow_copies == 0


def test_exit_releases_frames_and_ends_the_process() -> None:
    memory = PhysicalMemory(num_frames=4, page_size=PAGE)
    a = AddressSpace(memory, "A")
    a.translate(0)
    a.translate(PAGE)
    b = a.fork()
    a.exit()
    assert memory.num_used == 2  # still referenced by the child
    b.exit()
    assert memory.num_free == 4 and memory.free_frames() == (0, 1, 2, 3)
    for call in (lambda: a.translate(0), a.fork, a.exit, lambda: a.write(0, 1)):
        with pytest.raises(ValueError, match="has exited"):
            call()


# ---------------------------------------------------------------- errors never change state


def test_out_of_frames_raises_a_memory_error_and_changes_nothing() -> None:
    memory = PhysicalMemory(num_frames=2, page_size=PAGE)
    a = AddressSpace(memory, "A")
    a.translate(0)
    a.translate(PAGE)
    before = snapshot(memory, [a])
    with pytest.raises(MemoryError, match="no free frame"):
        a.translate(2 * PAGE)
    assert snapshot(memory, [a]) == before


def test_copy_on_write_without_a_free_frame_changes_nothing() -> None:
    memory = PhysicalMemory(num_frames=1, page_size=32)
    a = AddressSpace(memory, "A", num_pages=1)
    a.write(0, 4)
    b = a.fork()
    before = snapshot(memory, [a, b])
    with pytest.raises(OutOfFramesError):
        b.write(0, 8)
    assert snapshot(memory, [a, b]) == before
    a.exit()
    assert not b.write(0, 8).copied  # the last owner may now write in place


@pytest.mark.parametrize(
    ("address", "error", "match"),
    [
        (-1, ValueError, "outside"),
        (16 * PAGE, ValueError, "outside"),
        (1.5, TypeError, "int"),
        (True, TypeError, "int"),
    ],
)
def test_bad_addresses_raise_and_change_nothing(address, error, match) -> None:
    memory = PhysicalMemory(num_frames=2, page_size=PAGE)
    a = AddressSpace(memory, "A", num_pages=16)
    a.translate(0)
    before = snapshot(memory, [a])
    with pytest.raises(error, match=match):
        a.translate(address)
    with pytest.raises(error, match=match):
        a.write(address, 1)
    assert snapshot(memory, [a]) == before


def test_bad_byte_values_raise_before_any_page_fault() -> None:
    memory = PhysicalMemory(num_frames=2, page_size=PAGE)
    a = AddressSpace(memory, "A")
    with pytest.raises(ValueError, match="0..255"):
        a.write(0, 256)
    assert memory.num_used == 0 and a.page_faults == 0


@pytest.mark.parametrize("page_size", [0, -4096, 1000, 3])
def test_page_size_must_be_a_power_of_two(page_size: int) -> None:
    with pytest.raises(ValueError, match="power of two"):
        PhysicalMemory(num_frames=4, page_size=page_size)


def test_other_constructor_and_frame_errors() -> None:
    with pytest.raises(ValueError, match="num_frames"):
        PhysicalMemory(num_frames=0)
    memory = PhysicalMemory(num_frames=2, page_size=16)
    with pytest.raises(ValueError, match="num_pages"):
        AddressSpace(memory, "A", num_pages=0)
    with pytest.raises(TypeError, match="PhysicalMemory"):
        AddressSpace("memory", "A")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="does not exist"):
        memory.refcount(2)
    with pytest.raises(ValueError, match="is free"):
        memory.release(0)
    frame = memory.allocate()
    for offset in (-1, 16):
        with pytest.raises(ValueError, match="outside a page"):
            memory.read_byte(frame, offset)
    memory.release(frame)
    assert memory.num_free == 2


# ---------------------------------------------------------------- property tests

operation = st.one_of(
    st.tuples(st.just("touch"), st.integers(0, 7), st.integers(0, 4 * 64 - 1)),
    st.tuples(st.just("write"), st.integers(0, 7), st.integers(0, 4 * 64 - 1), st.integers(1, 255)),
    st.tuples(st.just("fork"), st.integers(0, 7)),
    st.tuples(st.just("exit"), st.integers(0, 7)),
    st.tuples(st.just("bad"), st.integers(0, 7), st.sampled_from([-1, 4 * 64, 10**9])),
)


@settings(max_examples=300, deadline=None)
@given(num_frames=st.integers(1, 6), ops=st.lists(operation, max_size=60))
def test_random_programs_keep_memory_consistent(num_frames: int, ops: list[tuple]) -> None:
    memory = PhysicalMemory(num_frames=num_frames, page_size=64)
    processes = [AddressSpace(memory, "p0", num_pages=4)]
    shadow = {"p0": {}}  # what each process should read back: address -> byte
    for op in ops:
        live = [p for p in processes if not p.exited]
        if not live:
            processes.append(AddressSpace(memory, f"p{len(processes)}", num_pages=4))
            shadow[processes[-1].name] = {}
            live = processes[-1:]
        proc = live[op[1] % len(live)]
        before = snapshot(memory, processes)
        try:
            if op[0] == "touch":
                table = proc.page_table
                result = proc.translate(op[2])
                vpn = op[2] // 64
                assert result.page_fault == (vpn not in table)
                if vpn in table:
                    assert result.frame == table[vpn].frame  # translation is stable
            elif op[0] == "write":
                proc.write(op[2], op[3])
                shadow[proc.name][op[2]] = op[3]
            elif op[0] == "fork":
                child = proc.fork(f"p{len(processes)}")
                processes.append(child)
                shadow[child.name] = dict(shadow[proc.name])
            elif op[0] == "exit":
                proc.exit()
            else:
                with pytest.raises(ValueError):
                    proc.translate(op[2])
                assert snapshot(memory, processes) == before
        except OutOfFramesError:
            assert memory.num_free == 0
            assert snapshot(memory, processes) == before
        check_invariants(memory, processes)
    # Copy-on-write isolation: every live process reads back exactly what it (or its ancestors
    # before the fork) wrote, whatever its relatives wrote afterwards.
    for p in processes:
        if p.exited:
            continue
        for vpn, entry in p.page_table.items():
            for address in range(vpn * 64, vpn * 64 + 64):
                expected = shadow[p.name].get(address, 0)
                assert memory.read_byte(entry.frame, address % 64) == expected
