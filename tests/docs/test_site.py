"""The docs site builds strict with no warning, and every fenced block of every page comes out as a
code block: a fence the Markdown extensions do not accept turns its code into a paragraph and
swallows the prose after it, which a strict build does not notice.

Needs the `docs` dependency group (mkdocs, Material, mkdocstrings)."""

from __future__ import annotations

import ast
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ..support import run_python

ROOT = Path(__file__).parents[2]
PAGES = sorted(path.relative_to(ROOT / "docs").as_posix() for path in (ROOT / "docs").glob("**/*.md"))
OPENING = re.compile(r"^\s*(`{3,}|~{3,})")
EXAMPLE = re.compile(r"^\s*Examples?\b[^:]*:\s*$")


def fenced_blocks(markdown: str) -> int:
    """How many fenced code blocks a page's Markdown opens (a fence closes on a line of at least as
    many of its own character)."""
    count, fence = 0, ""
    for line in markdown.splitlines():
        if fence:
            if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = ""
        elif opening := OPENING.match(line):
            count, fence = count + 1, opening.group(1)
    assert not fence, "a fence is left open at the end of the page"
    return count


class CodeBlocks(HTMLParser):
    """The code blocks of a built page (its `<pre>` elements, those of the API reference's
    generated objects apart) and the text outside them."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = 0
        self.text: list[str] = []
        self._pre = 0
        self._divs = 0
        self._generated_from: int | None = None  # the div depth where a generated object opened
        self._script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "div":
            self._divs += 1
            classes = (dict(attrs).get("class") or "").split()
            if self._generated_from is None and "doc-object" in classes:
                self._generated_from = self._divs
        elif tag == "pre":
            if self._pre == 0 and self._generated_from is None:
                self.blocks += 1
            self._pre += 1
        elif tag in ("script", "style"):
            self._script = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "div":
            if self._generated_from == self._divs:
                self._generated_from = None
            self._divs -= 1
        elif tag == "pre":
            self._pre -= 1
        elif tag in ("script", "style"):
            self._script = False

    def handle_data(self, data: str) -> None:
        if not self._pre and not self._script:
            self.text.append(data)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}
    built = run_python("-m", "mkdocs", "build", "--strict", "--site-dir", str(site), timeout=300, cwd=ROOT, env=env)
    output = built.stdout + built.stderr
    assert built.returncode == 0, output
    assert "WARNING" not in output, output
    return site


def built_page(site: Path, page: str) -> Path:
    name = page.removesuffix(".md")
    return site / ("index.html" if name == "index" else f"{name}/index.html")


def test_the_pages_hold_the_fenced_blocks_this_test_expects() -> None:
    counts = {page: fenced_blocks((ROOT / "docs" / page).read_text(encoding="utf-8")) for page in PAGES}
    assert counts["getting-started.md"] >= 4 and counts["durable.md"] >= 5 and counts["models.md"] >= 2
    assert fenced_blocks("```python { .notest }\nx = 1\n```\n\n````md\n```\n````\n") == 2


@pytest.mark.timeout(600)
@pytest.mark.parametrize("page", PAGES)
def test_every_fenced_block_of_the_page_comes_out_as_a_code_block(site: Path, page: str) -> None:
    parser = CodeBlocks()
    parser.feed(built_page(site, page).read_text(encoding="utf-8"))
    parser.close()
    fences = fenced_blocks((ROOT / "docs" / page).read_text(encoding="utf-8"))
    assert parser.blocks == fences, f"{page}: {fences} fenced blocks, {parser.blocks} code blocks in the HTML"
    shown = "".join(parser.text)
    assert "```" not in shown and "~~~" not in shown, f"{page}: a fence shows as text"


def test_every_docstring_example_is_a_fenced_block() -> None:
    """The API reference renders docstrings as Markdown: code under an `Example:` heading that is
    not fenced comes out as one run-on paragraph."""
    examples = 0
    for path in sorted((ROOT / "agentloop").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            lines = (ast.get_docstring(node) or "").splitlines()
            for i, line in enumerate(lines):
                if EXAMPLE.match(line):
                    examples += 1
                    following = next((later.strip() for later in lines[i + 1 :] if later.strip()), "")
                    where = f"{path.relative_to(ROOT)}: {getattr(node, 'name', 'the module')}"
                    assert following.startswith("```"), f"{where}: its example is not a fenced block"
    assert examples >= 10
