"""The documentation holds together: README.md is a short guide (at most 300 lines, its test
command the second bash block, which `.ci/run` runs) that links every page of docs/; every
relative link in README.md and docs/*.md leads to a file (and heading) that exists; every path
into the repository written in backticks (`backend/...`, `tests/...`, ...) exists, so no page
says code lives where it does not.

Cost: about 1 s (in the suite's two-worker run on 2 cores).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_README_LINES = 300
REPO_DIRS = ("backend", "nodes", "web", "tests", "docs", "workflows")
"""Top folders of the repository: a backticked word starting `backend/` is a path to check."""

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
REPO_PATH = re.compile(r"(?:^|(?<=[\s(\"']))((?:" + "|".join(REPO_DIRS) + r")/[\w./*{}\-]*)")
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z0-9_]*\b")
"""An upper-case word in a path (`workflows/ui/NAME.json`) stands for any name."""


def pages() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def prose(text: str) -> str:
    """The text without its fenced code blocks (links and spans there are code, not prose)."""
    return FENCE.sub("", text)


def links(text: str) -> list[str]:
    return [a or b for a, b in LINK.findall(prose(text))]


def repo_paths(text: str) -> list[str]:
    """Paths into the repository written in backticks (`backend/request.py`, `docs/`)."""
    found = []
    for _, span in CODE_SPAN.findall(prose(text)):
        for path in REPO_PATH.findall(span):
            found.append(path.rstrip(".,:;"))
    return found


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    result = set()
    for line in prose(path.read_text()).splitlines():
        match = re.match(r"#{1,6} (.+)", line)
        if match:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            result.add(base if count == 0 else f"{base}-{count}")
    return result


def exists(path: str) -> bool:
    if "*" in path or PLACEHOLDER.search(path):
        pattern = PLACEHOLDER.sub("*", path).rstrip("/")
        return any(ROOT.glob(pattern))
    return (ROOT / path).exists()


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)


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
