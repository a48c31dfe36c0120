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


def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> None:
    marker = item.get_closest_marker("attack")
    if marker is None or call.when != "call":
        return
    _outcomes[marker.args[0]].append(call.excinfo is None)


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
