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


def test_importing_agentloop_loads_no_http_stack_nor_validators_nor_the_command_line() -> None:
    code = (
        "import sys, agentloop\n"
        "heavy = [m for m in ('httpx', 'httpx_sse', 'jsonschema', 'pydantic', 'json', 'agentloop._coerce',"
        " 'agentloop.cli', 'argparse')"
        " if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_version_is_a_string() -> None:
    assert isinstance(agentloop.__version__, str) and agentloop.__version__.count(".") == 2


def _internal_imports() -> list[tuple[str, str, str]]:
    """(importing module, imported module, name) for every `from .x import name` in agentloop."""
    import ast
    from pathlib import Path

    root = Path(agentloop.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        package = module if parts[-1] == "__init__" else module.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
                found += [(module, target, alias.name) for alias in node.names]
    return found


def test_every_module_lists_what_the_others_import_from_it() -> None:
    """A module's `__all__` is accurate: every name it lists exists, and every public name another
    module of agentloop imports from it is listed (private helpers start with `_`)."""
    import importlib

    unlisted = []
    for module, target, name in _internal_imports():
        imported = importlib.import_module(target)
        listed = getattr(imported, "__all__", None)
        assert listed is not None, f"{target} has no __all__"
        for listed_name in listed:
            assert hasattr(imported, listed_name), f"{target}.__all__ lists {listed_name!r}, which it lacks"
        is_module = isinstance(getattr(imported, name, None), type(importlib))
        if not name.startswith("_") and name not in listed and not is_module:
            unlisted.append(f"{module} imports {name} from {target}")
    assert unlisted == []
