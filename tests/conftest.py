"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import SAMPLES


@pytest.fixture(scope="session")
def samples_dir() -> Path:
    return SAMPLES


# Op counts of the converter zoo before and after compiling (tests/test_zoo.py records them
# as the user property "ops_source_compiled"), printed at the end of the run when asked for
# with `pytest --zoo-table` (a passing `make test` prints nothing but its progress).
_OP_COUNTS: dict[str, tuple[int, int]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for key, value in report.user_properties:
        if key == "ops_source_compiled" and report.when == "call":
            name = report.nodeid.rsplit("[", 1)[-1].rstrip("]")
            _OP_COUNTS[name] = (int(value[0]), int(value[1]))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--zoo-table", action="store_true", default=False,
                     help="print the converter zoo's op counts before and after compiling")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    if not _OP_COUNTS or not config.getoption("--zoo-table"):
        return
    terminalreporter.section("converter zoo: ops before -> after compiling")
    for name, (before, after) in sorted(_OP_COUNTS.items()):
        terminalreporter.write_line(f"{name:28s} {before:4d} -> {after:4d}")
