"""The containment table: every security test is an attack of some class; the summary counts them.

Mark a test with ``@pytest.mark.attack("class")`` (or a module with ``pytestmark``). At the end of
the session pytest prints ``N attempts, N contained`` per class: a passed test is a contained attack.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

_outcomes: dict[str, list[bool]] = defaultdict(list)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "attack(cls): the class of attack a security test makes")


def pytest_runtest_setup(item: pytest.Item) -> None:
    # Carried on the test's reports, which pytest-xdist's workers send to the process that prints the table.
    marker = item.get_closest_marker("attack")
    if marker is not None:
        item.user_properties.append(("attack", marker.args[0]))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "call":
        return
    for name, value in report.user_properties:
        if name == "attack":
            _outcomes[value].append(report.passed)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:  # noqa: ANN001
    if not _outcomes:
        return
    terminalreporter.section("containment")
    width = max(len(name) for name in _outcomes)
    for name in sorted(_outcomes):
        results = _outcomes[name]
        terminalreporter.write_line(f"{name:<{width}}  {len(results):3d} attempts, {sum(results):3d} contained")
    total = [r for results in _outcomes.values() for r in results]
    terminalreporter.write_line(f"{'all':<{width}}  {len(total):3d} attempts, {sum(total):3d} contained")
