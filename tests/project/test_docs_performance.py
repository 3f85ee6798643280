"""Every reference to docs/performance.md names a section it has: code comments, docstrings, tests,
benchmarks and the other docs cite it by anchor (``performance.md#the-capture-proxy``) or by the
start of a heading (``docs/performance.md, "Two cores"``), and the page cites its own sections
(``see "The cached reopen"``). A section renamed without its references fails here."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "performance.md"

# A cited name: right after the file's name (a comma or a space between), quoted, opening with a capital.
CITED = re.compile(r"performance\.md(#[\w-]+)?\)?(?:,[ \t]*|[ \t]+)?(\"[A-Z][^\"()=]{2,120}\")?")
# The page's own references: see "X", in "X", ("X"), "X" below / above.
OWN = re.compile(r"(?:[Ss]ee |\(|in )\"([A-Z][^\"]{3,100})\"|\"([A-Z][^\"]{3,100})\"(?= (?:below|above))")


def _plain(text: str) -> str:
    """One line, lower case, without the comment markers of a wrapped citation."""
    text = re.sub(r"\s*\n\s*(?:#\s*|\*\s*|//\s*)?", " ", text)
    return re.sub(r"\s+", " ", text).strip().rstrip(".").lower().replace("`", "")


def _headings() -> list[str]:
    return [m.group(1).strip() for m in re.finditer(r"^#+\s+(.*)$", PAGE.read_text(), re.M)]


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")


def _tracked_texts() -> list[Path]:
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True, check=True)
    return [ROOT / f for f in listed.stdout.split() if f.endswith((".py", ".md", ".toml", ".html", ".cfg"))]


def cited_sections(text: str) -> list[tuple[int, str | None, str | None]]:
    """(line, anchor, name) of every citation of performance.md in ``text``."""
    found = []
    for m in CITED.finditer(text):
        anchor, name = m.group(1), m.group(2)
        if anchor or name:
            found.append((text.count("\n", 0, m.start()) + 1, anchor and anchor[1:], name and name.strip('"')))
    return found


def missing(text: str, where: str) -> list[str]:
    heads = [_plain(h) for h in _headings()]
    slugs = {_slug(h) for h in _headings()}
    wrong = []
    for line, anchor, name in cited_sections(text):
        if anchor and anchor not in slugs:
            wrong.append(f"{where}:{line}: #{anchor}")
        if name and not any(h.startswith(_plain(name)) for h in heads):
            wrong.append(f"{where}:{line}: {name!r}")
    return wrong


def test_every_citation_of_the_page_names_one_of_its_sections():
    wrong = []
    for path in _tracked_texts():
        if path.exists() and path not in (PAGE, Path(__file__).resolve()):  # this file cites wrong names on purpose
            wrong += missing(path.read_text(errors="replace"), str(path.relative_to(ROOT)))
    assert wrong == []


def test_the_page_cites_only_its_own_sections():
    text = PAGE.read_text()
    heads = [_plain(h) for h in _headings()]
    wrong = [m.group(1) or m.group(2) for m in OWN.finditer(text)]
    wrong = [name for name in wrong if not any(h.startswith(_plain(name)) for h in heads)]
    assert wrong == []


def test_the_check_finds_a_renamed_section():
    """Not vacuous: a citation of a heading that is not there, wrapped as comments wrap it, is
    reported, and one of a heading that is there is not."""
    first = _headings()[1]
    good = f'# (docs/performance.md, "{first}")\n# see docs/performance.md#{_slug(first)}\n'
    assert cited_sections(good) and missing(good, "x") == []
    bad = '# (docs/performance.md, "The line-level cold\n# parse") and performance.md#no-such-section\n'
    assert [w.split(": ", 1)[1] for w in missing(bad, "x")] == ["'The line-level cold\\n# parse'", "#no-such-section"]


def test_the_placeholders_of_this_round_are_there():
    """The lead's closing section is the last one; the round's figures have their sections."""
    tops = [h for h in re.findall(r"^## (.*)$", PAGE.read_text(), re.M)]
    assert tops[-1] == "Where issue 24 stands"
    assert any(h.startswith("Cold inspect: ") for h in tops)
