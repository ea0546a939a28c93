"""The README's shell commands, as the tests that run them as written read them
(``test_image_deploy.py``, ``test_readme_install.py``).

A section is a ``## `` heading's text up to the next one (its ``### `` subsections included); a block is
one of its ```` ```sh ```` code blocks; a command is one line of a block, continuations joined, the
comment dropped, split as a shell would.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def section(title: str, level: int = 2) -> str:
    """The text under the README's heading ``title`` (``level`` ``#``), up to the next heading of that
    level or above."""
    text = README.read_text()
    marker = f"\n{'#' * level} {title}\n"
    assert marker in text, f"README.md has no heading {marker.strip()!r}"
    body = text.split(marker, 1)[1]
    ends = [body.find(f"\n{'#' * n} ") for n in range(2, level + 1)]
    cut = min((e for e in ends if e >= 0), default=len(body))
    return body[:cut]


def blocks(text: str) -> list[list[list[str]]]:
    """The commands of each ```sh block of ``text``."""
    found = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.DOTALL):
        commands = []
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words:
                commands.append(words)
        found.append(commands)
    return found


def block_starting(text: str, *words: str) -> list[list[str]]:
    """The one block of ``text`` whose first command starts with ``words``."""
    [block] = [b for b in blocks(text) if b and b[0][: len(words)] == list(words)]
    return block


def command(text: str, *words: str) -> list[str]:
    """The one command of ``text``'s blocks that starts with ``words``."""
    [found] = [c for b in blocks(text) for c in b if c[: len(words)] == list(words)]
    return found
