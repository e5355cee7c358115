"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import SAMPLES


@pytest.fixture(scope="session")
def samples_dir() -> Path:
    return SAMPLES
