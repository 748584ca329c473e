"""Without PostgreSQL on the machine, the PostgreSQL tests fail and say what to install."""

from __future__ import annotations

import glob
import shutil

import pytest

from . import postgres


def test_a_missing_initdb_is_named_with_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(glob, "glob", lambda pattern: [])
    with pytest.raises(postgres.PostgresMissing, match=r"initdb is not installed.*apt-get install postgresql"):
        postgres.postgres_bin("initdb")
