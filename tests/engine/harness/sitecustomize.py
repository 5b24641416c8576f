"""Test-only: loaded at interpreter start of every engine process through ``PYTHONPATH``
(set by tests/engine only, never for users). It installs :mod:`forensics_harness`."""

import forensics_harness

forensics_harness.install()
