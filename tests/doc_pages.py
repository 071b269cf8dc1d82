"""Reading the documentation's pages as the checks do: their prose without code blocks, the
links and headings in it, and the repository paths written in backticks (tests/project's
test_docs and test_layout read them)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
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
