"""Hostile input, round 16 (attack 16c): ``forensics kernels`` with hostile launch records, and
the probe's ``FORENSICS_KERNELS`` settings."""

from __future__ import annotations

import pytest

from forensics.errors import ConfigurationError

# ------------------------------------------------ T89a: FORENSICS_KERNELS names no kernel

#: a kernel of the installed vLLM (0.33's block table)
SLOTS = ("vllm.v1.worker.gpu.block_table", "_compute_slot_mappings_kernel")


@pytest.mark.parametrize("value", ["1", "true", "yes", "_compute_slot_mapping_kernel",
                                   "vllm.v1.worker._compute_slot_mappings_kernel",
                                   "_compute_slot_mappings_kernel,_typo_kernel"])
def test_a_selection_naming_no_installed_kernel_is_refused(value: str) -> None:
    """``FORENSICS_KERNELS=1`` (``0`` turns it off), ``true``, a misspelt name: each glob was
    taken as given, matched no kernel, and the engine ran with the recorder recording nothing
    and nothing said of it. A glob that names none of the installed vLLM's kernels is refused
    in one line (before the probe starts anything: ``kernels.settings()``) naming the
    variable and the glob."""
    from forensics.kernels.coverage import installed_kernels
    from forensics.probe import kernels as K

    assert SLOTS in installed_kernels()
    with pytest.raises(ConfigurationError, match=r"FORENSICS_KERNELS=.*names none of the "
                                                 r"installed vLLM's \d+ Triton kernels"):
        K.settings({"FORENSICS_KERNELS": value})


@pytest.mark.parametrize("value", ["ALL", "All", "_compute_slot_mappings_kernel, ALL"])
def test_all_is_all_in_any_case(value: str) -> None:
    """``ALL`` was a glob that matched no kernel (``OFF``, ``NONE`` were read in any case)."""
    from forensics.probe import kernels as K

    assert K.selection({"FORENSICS_KERNELS": value}) == ("*",)


def test_a_module_qualified_name_as_coverage_lists_it_records_that_kernel() -> None:
    """``forensics kernels --coverage`` names a kernel ``module.name``; that name (or a glob
    of it) in ``FORENSICS_KERNELS`` matched the kernel's bare name only, so it recorded
    nothing: a glob holding a dot is matched against ``module.name``."""
    from forensics.probe import kernels as K

    globs = K.selection({"FORENSICS_KERNELS": f"{'.'.join(SLOTS)}, vllm.v1.sample.*"})
    assert globs is not None

    def jit(module: str, name: str) -> object:
        def fn(a_ptr: int) -> None:
            """A kernel's signature."""
        fn.__module__, fn.__name__ = module, name
        return type("JITFunction", (), {"fn": fn})()

    assert K.KernelMeta(jit(*SLOTS), globs).wanted
    assert K.KernelMeta(jit("vllm.v1.sample.ops.topk_topp_triton", "_topk_topp_kernel"),
                        globs).wanted
    assert not K.KernelMeta(jit("vllm.v1.worker.gpu.other", SLOTS[1]), globs).wanted
    assert K.selection({"FORENSICS_KERNELS": SLOTS[1]}) == (SLOTS[1],)  # a bare name: as before
