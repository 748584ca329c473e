"""The long profile (`AGENTLOOP_PROFILE=long`) lifts the suite's 60 s per-test timeout: its
hypothesis tests run thousands of examples and the soak 50,000 runs per backend."""

from __future__ import annotations

import pytest

from ._profile import LONG

LONG_TIMEOUT = 3600


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not LONG:
        return
    for item in items:
        if "reliability" in item.nodeid and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(LONG_TIMEOUT))
