"""A toy paged virtual memory (§2): the operating-system ideas PagedAttention borrows.

:class:`PhysicalMemory` is a fixed number of equal-sized *frames* with a free list and a reference
count per frame. :class:`AddressSpace` is one process: a contiguous range of *virtual* addresses
and a page table mapping each virtual page number (VPN) to a frame. It shows, in a few lines each,

* translation: ``virtual address = vpn × page_size + offset`` → ``frame × page_size + offset``;
* demand paging: a page gets a frame on its first touch (a *page fault*), not before;
* sharing: :meth:`AddressSpace.fork` gives the child the parent's frames (reference count + 1) and
  marks both sides copy-on-write;
* copy-on-write: the first write to a shared page copies it; a sole owner just writes in place;
* release: :meth:`AddressSpace.exit` drops every reference; a frame with none left is free again.

§4 and §5 rename these: frame → physical KV block, page table → block table, process → sequence.
Every method checks its arguments (and that a frame is free when it needs one) before it changes any
state, so a raised error leaves memory and page tables exactly as they were.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from kvcourse._checks import as_index


class OutOfFramesError(MemoryError):
    """Raised when a page fault or a copy-on-write needs a frame and every frame is in use."""


@dataclass(frozen=True)
class PageTableEntry:
    """One row of a page table: the frame a virtual page lives in, and whether it is shared
    copy-on-write (read-only until the next write copies it or finds itself the sole owner)."""

    frame: int
    copy_on_write: bool = False


@dataclass(frozen=True)
class TranslationResult:
    """What one translation did. ``page_fault``: the page had no frame and got one now (demand
    paging). ``copied``: a write to a shared page copied it to a new frame (copy-on-write)."""

    virtual_address: int
    vpn: int
    offset: int
    frame: int
    physical_address: int
    page_fault: bool
    copied: bool


class PhysicalMemory:
    """``num_frames`` frames of ``page_size`` bytes each, a free list and per-frame refcounts.

    Frames are handed out lowest number first, so a demo is reproducible. A frame is *used* while
    its reference count (the number of page-table entries pointing at it) is positive, else free.
    """

    def __init__(self, num_frames: int, page_size: int = 4096) -> None:
        as_index(num_frames, "num_frames")
        as_index(page_size, "page_size")
        if num_frames <= 0:
            raise ValueError(f"num_frames must be positive, got {num_frames}; pass e.g. 8")
        if page_size <= 0 or page_size & (page_size - 1):
            raise ValueError(
                f"page_size must be a power of two (e.g. 4096) so an address splits into page "
                f"number and offset by its bits; got {page_size}"
            )
        self.num_frames = num_frames
        self.page_size = page_size
        self._free: list[int] = list(range(num_frames))  # a heap: smallest frame first
        self._refcount = [0] * num_frames
        self._data: dict[int, bytearray] = {}  # contents of used frames only

    @property
    def num_free(self) -> int:
        """How many frames are on the free list."""
        return len(self._free)

    @property
    def num_used(self) -> int:
        """How many frames hold at least one page (``num_used + num_free == num_frames``)."""
        return self.num_frames - len(self._free)

    def free_frames(self) -> tuple[int, ...]:
        """The free frame numbers, in ascending order."""
        return tuple(sorted(self._free))

    def refcount(self, frame: int) -> int:
        """How many page-table entries point at ``frame`` (0 means the frame is free)."""
        self._check_frame(frame)
        return self._refcount[frame]

    def allocate(self) -> int:
        """Take the lowest free frame, zero it and give it one reference. Raises
        :class:`OutOfFramesError` (a ``MemoryError``) when no frame is free."""
        if not self._free:
            raise OutOfFramesError(
                f"no free frame: all {self.num_frames} frames are in use; exit a process "
                f"(or create PhysicalMemory with more frames) before touching new pages"
            )
        frame = heapq.heappop(self._free)
        self._refcount[frame] = 1
        self._data[frame] = bytearray(self.page_size)
        return frame

    def share(self, frame: int) -> None:
        """Add one reference to a used frame (a second page table now points at it)."""
        self._check_used(frame)
        self._refcount[frame] += 1

    def release(self, frame: int) -> None:
        """Drop one reference; at zero the frame goes back on the free list."""
        self._check_used(frame)
        self._refcount[frame] -= 1
        if self._refcount[frame] == 0:
            del self._data[frame]
            heapq.heappush(self._free, frame)

    def read_byte(self, frame: int, offset: int) -> int:
        """The byte at ``offset`` (0 .. page_size - 1) inside a used frame."""
        self._check_used(frame)
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise TypeError(f"offset must be an int, got {offset!r}")
        if not 0 <= offset < self.page_size:
            raise ValueError(f"offset {offset} is outside a page; use 0..{self.page_size - 1}")
        return self._data[frame][offset]

    def _write_byte(self, frame: int, offset: int, value: int) -> None:
        self._data[frame][offset] = value

    def _copy(self, source: int, target: int) -> None:
        self._data[target][:] = self._data[source]

    def _check_frame(self, frame: int) -> None:
        as_index(frame, "frame")
        if not 0 <= frame < self.num_frames:
            raise ValueError(f"frame {frame} does not exist; frames are 0..{self.num_frames - 1}")

    def _check_used(self, frame: int) -> None:
        self._check_frame(frame)
        if self._refcount[frame] == 0:
            raise ValueError(f"frame {frame} is free; only a used frame can be shared or released")


class AddressSpace:
    """One process: ``num_pages`` virtual pages and a page table (VPN → frame in ``memory``)."""

    def __init__(self, memory: PhysicalMemory, name: str, num_pages: int = 16) -> None:
        if not isinstance(memory, PhysicalMemory):
            raise TypeError(f"memory must be a PhysicalMemory, got {memory!r}")
        as_index(num_pages, "num_pages")
        if num_pages <= 0:
            raise ValueError(f"num_pages must be positive, got {num_pages}; pass e.g. 16")
        self.memory = memory
        self.name = str(name)
        self.num_pages = num_pages
        self.page_faults = 0  # demand allocations so far
        self.cow_copies = 0  # copy-on-write copies so far
        self.exited = False
        self._table: dict[int, PageTableEntry] = {}

    @property
    def size(self) -> int:
        """Bytes of virtual address space: addresses ``0 .. size - 1`` are valid."""
        return self.num_pages * self.memory.page_size

    @property
    def page_table(self) -> dict[int, PageTableEntry]:
        """A copy of the page table, VPN → entry, for resident pages only, in VPN order."""
        return dict(sorted(self._table.items()))

    def split(self, virtual_address: int) -> tuple[int, int]:
        """``(vpn, offset)`` of a valid virtual address; a ``ValueError`` says what was wrong."""
        self._check_alive()
        as_index(virtual_address, "virtual_address")
        if not 0 <= virtual_address < self.size:
            raise ValueError(
                f"virtual address {virtual_address:#x} is outside process {self.name!r}: valid "
                f"addresses are 0x0..{self.size - 1:#x} ({self.num_pages} pages of "
                f"{self.memory.page_size} B); use a smaller address or more num_pages"
            )
        return divmod(virtual_address, self.memory.page_size)

    def translate(self, virtual_address: int, *, write: bool = False) -> TranslationResult:
        """Map a virtual address to a physical one, allocating on first touch (a page fault).

        With ``write=True`` a copy-on-write page is made private first: copied to a new frame if
        others still share it, or simply unmarked if this process is its last user.
        """
        vpn, offset = self.split(virtual_address)
        entry = self._table.get(vpn)
        fault = copied = False
        if entry is None:
            entry = PageTableEntry(self.memory.allocate())  # raises before anything changed
            self.page_faults += 1
            fault = True
        elif write and entry.copy_on_write:
            if self.memory.refcount(entry.frame) > 1:
                frame = self.memory.allocate()  # raises before anything changed
                self.memory._copy(entry.frame, frame)
                self.memory.release(entry.frame)
                entry = PageTableEntry(frame)
                self.cow_copies += 1
                copied = True
            else:
                entry = PageTableEntry(entry.frame)  # sole owner: write in place
        self._table[vpn] = entry
        physical = entry.frame * self.memory.page_size + offset
        return TranslationResult(virtual_address, vpn, offset, entry.frame, physical, fault, copied)

    def read(self, virtual_address: int) -> int:
        """The byte at a virtual address (an untouched page reads as zero after its page fault)."""
        result = self.translate(virtual_address)
        return self.memory.read_byte(result.frame, result.offset)

    def write(self, virtual_address: int, value: int) -> TranslationResult:
        """Store one byte (0..255) at a virtual address, copying a shared page first."""
        as_index(value, "value")
        if not 0 <= value <= 255:
            raise ValueError(f"value must be one byte, 0..255, got {value}")
        result = self.translate(virtual_address, write=True)
        self.memory._write_byte(result.frame, result.offset, value)
        return result

    def fork(self, name: str | None = None) -> AddressSpace:
        """A child that shares every resident frame (refcount + 1), both sides copy-on-write.

        No frame is copied and none is allocated, so fork never runs out of memory.
        """
        self._check_alive()
        child = AddressSpace(self.memory, name or f"{self.name}'", self.num_pages)
        for vpn, entry in self._table.items():
            self.memory.share(entry.frame)
            shared = PageTableEntry(entry.frame, copy_on_write=True)
            self._table[vpn] = child._table[vpn] = shared
        return child

    def exit(self) -> None:
        """Release every frame this process maps; any later use raises ``ValueError``."""
        self._check_alive()
        for entry in self._table.values():
            self.memory.release(entry.frame)
        self._table.clear()
        self.exited = True

    def _check_alive(self) -> None:
        if self.exited:
            raise ValueError(f"process {self.name!r} has exited; create or fork a live one")

    def __repr__(self) -> str:
        pages = ", ".join(
            f"{vpn}->{e.frame}{'*' if e.copy_on_write else ''}"
            for vpn, e in self.page_table.items()
        )
        return f"AddressSpace({self.name!r}, {{{pages}}})"
