from __future__ import annotations

import pytest


@pytest.fixture(
    params=[
        pytest.param(("asyncio", {"debug": True}), id="asyncio"),
        pytest.param("trio", id="trio"),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    """Every async test runs on asyncio (debug mode) and on trio."""
    return request.param
