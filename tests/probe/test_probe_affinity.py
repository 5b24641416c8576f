"""The writer thread leaves the cores vLLM pins the worker to (forensics.probe.affinity)."""

from __future__ import annotations

import os
import threading

import pytest

from forensics.probe.affinity import leave_engine_cores, online_cpus, parse_cpu_list


def test_parse_cpu_list() -> None:
    assert parse_cpu_list("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert parse_cpu_list("0") == {0}


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(online_cpus()) < 2,
                    reason="needs Linux thread affinity and two CPUs")
def test_a_thread_pinned_like_the_engine_moves_itself_to_the_other_cores() -> None:
    """Like vLLM's CPU worker: the thread starts pinned to CPU 0 (inherited); only it moves."""
    allowed = set(os.sched_getaffinity(0))
    answer: dict[str, object] = {}

    def writer() -> None:
        os.sched_setaffinity(0, {0})  # what the thread inherits from a pinned worker
        answer.update(leave_engine_cores(allowed | {0}),
                      now=set(os.sched_getaffinity(0)))

    thread = threading.Thread(target=writer)
    thread.start()
    thread.join()
    assert answer["engine_cpus"] == [0]
    assert answer["writer_cpus"] == sorted(allowed - {0}) == sorted(answer["now"])
    assert set(os.sched_getaffinity(0)) == allowed  # the calling thread is untouched


def test_nowhere_else_to_go_keeps_the_thread_where_it_is() -> None:
    mine = set(os.sched_getaffinity(0))
    result = {}
    thread = threading.Thread(target=lambda: result.update(leave_engine_cores(set(mine))))
    thread.start()
    thread.join()
    assert result == {"engine_cpus": sorted(mine), "writer_cpus": sorted(mine)}
