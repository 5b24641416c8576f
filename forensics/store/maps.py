"""How many more memory maps this process may make (Linux's ``vm.max_map_count``), so that a
capture of more segments than can be mapped is refused up front, naming the limit and the fix,
and a map that fails for want of one says so; and a segment's map itself (:func:`map_file`),
whose pages :func:`release_pages` drops."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import TYPE_CHECKING

from forensics.errors import CaptureFormatError
from forensics.escaping import terminal
from forensics.libc import libc_function

if TYPE_CHECKING:
    import pyarrow as pa

_MADV_DONTNEED = 4  # Linux <sys/mman.h>
_PROT_READ, _MAP_SHARED = 1, 1  # Linux <sys/mman.h>

#: the kernel's limit of memory maps per process
MAX_MAP_COUNT = Path("/proc/sys/vm/max_map_count")
#: this process's memory maps, one a line
SELF_MAPS = Path("/proc/self/maps")
#: the maps left for what a command does beside its segments (libraries, arenas, threads)
RESERVED_MAPS = 4096


def map_count_limit() -> int | None:
    """``vm.max_map_count``, or None where it cannot be read (not Linux)."""
    try:
        return int(MAX_MAP_COUNT.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None


def maps_in_use() -> int:
    """The memory maps this process holds now (0 where that cannot be read)."""
    try:
        with SELF_MAPS.open("rb") as maps:
            return sum(1 for _ in maps)
    except OSError:
        return 0


def require_map_slots(root: Path, segments: int) -> None:
    """Refuse (CaptureFormatError) a capture of more ``segments`` than this process can map
    beside :data:`RESERVED_MAPS`, before any is mapped: one line naming the count, the limit
    and the fix. Nothing is refused where the limit cannot be read."""
    limit = map_count_limit()
    if limit is None:
        return
    used = maps_in_use()
    if segments > limit - used - RESERVED_MAPS:
        raise CaptureFormatError(
            f"'{terminal(root)}' holds {segments} segment files, more than this process can map "
            f"(vm.max_map_count is {limit}, {used} maps in use, {RESERVED_MAPS} kept for the "
            f"command); raise the limit (sysctl -w vm.max_map_count="
            f"{segments + used + 2 * RESERVED_MAPS}) or read a copy with fewer, larger segments")


def why_no_map() -> str:
    """The words of a map refused for want of memory (ENOMEM): the map count against its limit
    (the likelier cause with many segments), else the address space."""
    limit, used = map_count_limit(), maps_in_use()
    if limit is None:
        return "out of memory maps or address space"
    return (f"out of memory maps ({used} in use, vm.max_map_count {limit}: raise it with "
            f"sysctl -w vm.max_map_count=N) or of address space (ulimit -v)")


def release_pages(address: int, size: int) -> None:
    """``madvise(MADV_DONTNEED)`` over the whole pages of a read-only file mapping: they leave
    the resident set (RSS) and are read back from the page cache on the next access. A no-op
    off Linux or where libc cannot be reached."""
    madvise = libc_function("madvise")
    if madvise is None:
        return
    import ctypes

    page = os.sysconf("SC_PAGE_SIZE")
    start = -(-address // page) * page  # the first whole page inside the mapping
    if address + size > start:
        madvise(ctypes.c_void_p(start), ctypes.c_size_t(address + size - start),
                _MADV_DONTNEED)


def map_file(fd: int, size: int) -> pa.Buffer:
    """The first ``size`` bytes of the open file ``fd`` memory-mapped read-only as an Arrow
    buffer that keeps no descriptor: the caller closes ``fd`` (a capture of thousands of
    segments stays far below the open-files limit, often 1024). Python's ``mmap`` keeps a
    duplicate descriptor per mapping; it is used only where libc cannot be reached."""
    mapping = _Mapping.of(fd, size)
    if mapping is None:
        import mmap

        import pyarrow as pa

        return pa.py_buffer(mmap.mmap(fd, size, access=mmap.ACCESS_READ))
    import pyarrow as pa

    return pa.foreign_buffer(mapping.address, size, base=mapping)


class _Mapping:
    """A read-only shared mapping made by libc's ``mmap``, unmapped when collected (the
    Arrow buffer over it holds it as its base)."""

    def __init__(self, address: int, size: int) -> None:
        self.address, self.size = address, size

    @classmethod
    def of(cls, fd: int, size: int) -> _Mapping | None:
        """Map ``size`` bytes of ``fd``; None off Linux. Raises OSError when mmap fails."""
        mmap_c, munmap = libc_function("mmap"), libc_function("munmap")
        if mmap_c is None or munmap is None:
            return None
        import ctypes

        mmap_c.restype = ctypes.c_void_p
        mmap_c.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                           ctypes.c_int, ctypes.c_long]
        address = mmap_c(None, size, _PROT_READ, _MAP_SHARED, fd, 0)
        if address is None or address == ctypes.c_void_p(-1).value:
            err = ctypes.get_errno() or errno.ENOMEM
            raise OSError(err, why_no_map() if err == errno.ENOMEM else os.strerror(err))
        return cls(address, size)

    def __del__(self) -> None:
        import ctypes

        munmap = libc_function("munmap")
        if munmap is None:  # the interpreter is shutting down
            return
        munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        munmap(ctypes.c_void_p(self.address), ctypes.c_size_t(self.size))
