"""The public namespace: `__all__` is exactly the public names, and every export's hints resolve."""

from __future__ import annotations

import inspect
import subprocess
import sys
import typing

import pytest

import agentloop
import agentloop.testing


def test_all_lists_exactly_the_public_names() -> None:
    names = [name for name in dir(agentloop) if not name.startswith("_")]  # lazy names included
    public = {name for name in names if not inspect.ismodule(getattr(agentloop, name))}
    assert isinstance(agentloop.__all__, tuple)
    assert set(agentloop.__all__) == public
    assert "annotations" not in dir(agentloop)  # no `from __future__` leaking into the namespace
    assert list(agentloop.__all__) == sorted(agentloop.__all__, key=lambda n: (not n.isupper(), n))


def test_testing_exports_what_it_defines() -> None:
    defined = {
        name
        for name, value in vars(agentloop.testing).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == "agentloop.testing"
    }
    assert set(agentloop.testing.__all__) == defined


@pytest.mark.parametrize("name", sorted(agentloop.__all__))
def test_type_hints_of_every_export_resolve(name: str) -> None:
    value = getattr(agentloop, name)
    if inspect.isclass(value) or inspect.isfunction(value):
        typing.get_type_hints(value)
        if inspect.isclass(value):
            for attr in vars(value).values():
                if inspect.isfunction(attr):
                    typing.get_type_hints(attr)


def test_importing_agentloop_loads_no_http_stack_nor_validators() -> None:
    code = (
        "import sys, agentloop\n"
        "heavy = [m for m in ('httpx', 'httpx_sse', 'jsonschema', 'pydantic', 'json', 'agentloop._coerce')"
        " if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_version_is_a_string() -> None:
    assert isinstance(agentloop.__version__, str) and agentloop.__version__.count(".") == 2
