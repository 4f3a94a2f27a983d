"""The shell blocks of the documentation that a test runs (e2e/test_docs_run.py), pure: a page's
markdown in, its marked blocks out, each command with the line it starts on.

A block is marked by the line `<!-- run: e2e -->` right before its opening fence (```sh, ```shell
or ```bash); mkdocs renders the mark as an HTML comment, so readers never see it. A command is a
line, with the lines a trailing `\\`, `|`, `&&` or `||` continues and a here-document's body;
blank lines and whole-line `#` comments between commands are not commands."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

MARK = "<!-- run: e2e -->"
SHELLS = ("sh", "shell", "bash")
_FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w-]*)")
_HEREDOC = re.compile(r"(?<!<)<<-?\s*(['\"]?)(\w+)\1")
_CONTINUED = ("\\", "|", "&&", "||")

# The marked pages, in walkthroughs: e2e/test_docs_run.py runs each walkthrough in one namespace of
# its own, its pages in this order, each page in one shell (a page may use what an earlier page of
# its walkthrough made: the Quickstart's cluster demo-single). A marked page missing here fails
# tests/unit/test_docs_blocks.py.
WALKTHROUGHS: dict[str, tuple[str, ...]] = {
    "quickstart": ("quickstart.md", "clusters.md", "cli.md", "sql-objects.md"),
    "backup": ("backups.md",),
}


@dataclass(frozen=True)
class Command:
    line: int  # where it starts in the page (1-based)
    text: str  # as written, its continuation lines included


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # the opening fence's line (1-based)
    commands: tuple[Command, ...]


class MarkError(ValueError):
    """A mark that marks no shell block, or a block with no end."""


def marked_blocks(page: str, text: str) -> list[Block]:
    """The blocks of `text` (the markdown of `page`) marked to be run, in page order."""
    lines = text.splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != MARK:
            i += 1
            continue
        opening = lines[i + 1] if i + 1 < len(lines) else ""
        m = _FENCE.match(opening)
        if not m or m.group(2) not in SHELLS:
            raise MarkError(
                f"{page}:{i + 1}: {MARK} must be followed at once by a ```sh, ```shell or ```bash block, "
                f"not {opening.strip()!r}: move the mark or remove it"
            )
        fence = m.group(1)
        end = next((j for j in range(i + 2, len(lines)) if lines[j].strip() == fence), None)
        if end is None:
            raise MarkError(f"{page}:{i + 2}: the marked block has no closing {fence}: close it")
        blocks.append(Block(page, i + 2, tuple(_commands(lines[i + 2 : end], first_line=i + 3))))
        i = end + 1
    return blocks


def _commands(body: list[str], first_line: int) -> list[Command]:
    commands: list[Command] = []
    current: list[str] = []
    start = 0
    heredoc: str | None = None
    for n, line in enumerate(body, start=first_line):
        if heredoc is not None:
            current.append(line)
            if line.strip() == heredoc:  # its end ends the command
                heredoc = None
                commands.append(Command(start, "\n".join(current)))
                current = []
            continue
        if not current:
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            start = n
        current.append(line)
        m = _HEREDOC.search(line)
        if m:
            heredoc = m.group(2)
            continue
        if not _continued(line):
            commands.append(Command(start, "\n".join(current)))
            current = []
    if current:
        commands.append(Command(start, "\n".join(current)))
    return commands


def _continued(line: str) -> bool:
    return line.rstrip().endswith(_CONTINUED)


def steps(blocks: list[Block]) -> list[tuple[Block, Command]]:
    """Every command of `blocks`, in order, with its block."""
    return [(b, c) for b in blocks for c in b.commands]


def script(commands: list[tuple[Block, Command]], step_file_variable: str = "DOCS_STEP") -> str:
    """A bash script running `commands` in order (`set -euo pipefail`: the first failure stops
    it), printing each as written (`$ ` before its first line, `> ` before the others; variables
    unexpanded, so what they hold is never printed) and writing its index to the file named by
    `$<step_file_variable>` before running it, so a failure can be traced to its page and line."""
    out = ["set -euo pipefail"]
    for index, (_, command) in enumerate(commands):
        shown = "\n".join(
            ("$ " if k == 0 else "> ") + text for k, text in enumerate(command.text.splitlines())
        )
        out.append(f"printf '%s\\n' {index} > \"${step_file_variable}\"")
        out.append(f"printf '%s\\n' {shlex.quote(shown)}")
        out.append(command.text)
    return "\n".join(out) + "\n"
