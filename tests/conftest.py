"""Shared pytest configuration: the --update-golden flag and paths to shared data."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
COMPAT = SHARED / "compat"
STDLIB = REPO / "stdlib"


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite golden files under tests/golden instead of comparing")


@pytest.fixture
def update_golden(request) -> bool:
    return request.config.getoption("--update-golden")


def require_compat() -> Path:
    if not COMPAT.is_dir():
        pytest.skip(f"compat data not found at {COMPAT} (it lives in ../shared, which a user's clone does not have)")
    return COMPAT
