"""How many more memory maps this process may make (Linux's ``vm.max_map_count``), so that a
capture of more segments than can be mapped is refused up front, naming the limit and the fix,
and a map that fails for want of one says so."""

from __future__ import annotations

from pathlib import Path

from forensics.errors import CaptureFormatError
from forensics.escaping import terminal

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
