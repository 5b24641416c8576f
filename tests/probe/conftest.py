"""Fixtures of the probe tests."""

from __future__ import annotations

import pytest
from probe_fakes import FakeWriter


@pytest.fixture
def fake_writer() -> FakeWriter:
    """A fresh in-memory writer."""
    return FakeWriter()
