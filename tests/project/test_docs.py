"""The documentation holds together: README.md is a short guide (at most 300 lines, its test
command the second bash block, which `.ci/run` runs) that links every page of docs/; every
relative link in README.md and docs/*.md leads to a file (and heading) that exists; every path
into the repository written in backticks (`backend/...`, `tests/...`, ...) exists, so no page
says code lives where it does not.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import re

import pytest
from doc_pages import (
    README,
    ROOT,
    anchors,
    bash_blocks,
    exists,
    links,
    pages,
    repo_paths,
    slug,
)

pytestmark = pytest.mark.fast

MAX_README_LINES = 300


def test_the_readme_is_a_short_guide():
    text = README.read_text()
    lines = len(text.splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines, at most {MAX_README_LINES}"
    first, second = bash_blocks(text)[:2]
    assert "paradit generate" in first and "--model tiny-wan --world-size 2" in first
    assert "pytest" in second, "the second bash block of README.md is the test command (.ci/run)"


def test_the_readme_links_every_page_of_docs():
    linked = {target.split("#")[0] for target in links(README.read_text())}
    missing = [
        f"docs/{page.name}"
        for page in sorted((ROOT / "docs").glob("*.md"))
        if f"docs/{page.name}" not in linked
    ]
    assert not missing, f"README.md does not link these pages: {missing}"


def test_every_relative_link_leads_somewhere():
    broken = []
    for page in pages():
        for target in links(page.read_text()):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
                continue
            file, _, anchor = target.partition("#")
            resolved = (page.parent / file).resolve() if file else page
            where = f"{page.relative_to(ROOT)}: ({target})"
            if not resolved.exists():
                broken.append(f"{where} no such file")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"{where} no such heading")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_every_repository_path_in_backticks_exists():
    stale = [
        f"{page.relative_to(ROOT)}: `{path}`"
        for page in pages()
        for path in repo_paths(page.read_text())
        if not exists(path)
    ]
    assert not stale, "paths that do not exist (moved or renamed?):\n" + "\n".join(stale)


def test_the_checks_read_what_they_claim():
    """The helpers find what a page holds, and refuse what is not there."""
    text = "See [a](docs/x.md#b) and `backend/request.py`, `tests/test_NAME.py` ```\n```\n"
    assert links(text) == ["docs/x.md#b"]
    assert repo_paths("`backend/request.py`, `python docs/measure_memory.py` `mybackend/x`") == [
        "backend/request.py",
        "docs/measure_memory.py",
    ]
    assert repo_paths("```\n`backend/nowhere.py`\n```\n") == []  # code blocks are code
    assert exists("workflows/ui/NAME.json") and not exists("backend/nowhere.py")
    assert slug("The request's fields") == "the-requests-fields"
    replicas = "data-parallel-replicas---dp-degree-d"
    assert slug("Data-parallel replicas (`--dp-degree D`)") == replicas
