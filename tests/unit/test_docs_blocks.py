"""The documentation's runnable shell blocks (tests/support/docs_blocks.py): marked blocks found
with the lines their commands start on, unmarked blocks skipped, a misplaced mark refused, every
marked page in a walkthrough of e2e/test_docs_run.py, and each page's script valid bash."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.docs_blocks import (
    MARK,
    WALKTHROUGHS,
    Block,
    Command,
    MarkError,
    marked_blocks,
    script,
    steps,
)

DOCS = Path(__file__).resolve().parents[2] / "docs"

PAGE = f"""# A page

```sh
kubectl delete namespace everything     # unmarked: never run
```

{MARK}
```sh
# a comment, not a command
kubectl apply -f examples/one-instance.yaml

kubectl wait --for=condition=Ready mysqlcluster/demo-single \\
  --timeout=300s
PASSWORD=$(kubectl get secret s -o jsonpath='{{.data.p}}' | base64 -d)
printf '%s' "$PASSWORD" |
  kubectl exec -i demo-single-0 -- cat
```

Text.

{MARK}
```shell
kubectl apply -f - <<'YAML'
kind: ConfigMap
# not a comment: inside the here-document
YAML
kubectl get configmaps
```

```yaml
kind: MySQLCluster
```
"""


def test_marked_blocks_are_found_with_the_lines_their_commands_start_on():
    blocks = marked_blocks("page.md", PAGE)
    assert [b.line for b in blocks] == [8, 22]
    first, second = blocks
    assert first.page == "page.md"
    assert first.commands == (
        Command(10, "kubectl apply -f examples/one-instance.yaml"),
        Command(12, "kubectl wait --for=condition=Ready mysqlcluster/demo-single \\\n  --timeout=300s"),
        Command(14, "PASSWORD=$(kubectl get secret s -o jsonpath='{.data.p}' | base64 -d)"),
        Command(15, "printf '%s' \"$PASSWORD\" |\n  kubectl exec -i demo-single-0 -- cat"),
    )
    assert second.commands == (
        Command(
            23,
            "kubectl apply -f - <<'YAML'\nkind: ConfigMap\n# not a comment: inside the here-document\nYAML",
        ),
        Command(27, "kubectl get configmaps"),
    )
    lines = PAGE.splitlines()
    for b in blocks:  # the numbers are the page's own (1-based)
        assert lines[b.line - 1].startswith("```")
        for c in b.commands:
            assert lines[c.line - 1] == c.text.splitlines()[0]


def test_unmarked_blocks_are_skipped():
    texts = [c.text for b in marked_blocks("page.md", PAGE) for c in b.commands]
    assert not any("delete namespace" in t or "MySQLCluster" in t for t in texts)
    assert marked_blocks("plain.md", "```sh\nrm -rf /\n```\n") == []


@pytest.mark.parametrize(
    "text, says",
    [
        (f"{MARK}\n\n```sh\nls\n```\n", "plain.md:1: "),  # a blank line between
        (f"{MARK}\n```yaml\nkind: X\n```\n", "plain.md:1: "),  # not a shell block
        (f"text\n{MARK}\n", "plain.md:2: "),  # nothing after it
        (f"{MARK}\n```sh\nls\n", "plain.md:2: the marked block has no closing"),
    ],
)
def test_a_mark_that_marks_no_shell_block_is_refused_naming_its_line(text, says):
    with pytest.raises(MarkError, match=says):
        marked_blocks("plain.md", text)


def test_the_script_prints_each_command_as_written_and_stops_at_the_first_failure(tmp_path):
    todo = steps(
        [
            Block(
                "p.md",
                1,
                (
                    Command(2, 'SECRET=hidden; echo "one"'),
                    Command(3, 'test "$SECRET" = other'),
                    Command(4, "echo never"),
                ),
            )
        ]
    )
    step = tmp_path / "step"
    r = subprocess.run(
        ["bash", "-c", script(todo)],
        capture_output=True,
        text=True,
        env={"DOCS_STEP": str(step), "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 1
    assert r.stdout == '$ SECRET=hidden; echo "one"\none\n$ test "$SECRET" = other\n'
    assert step.read_text().strip() == "1"  # the failed command's index


def test_every_marked_page_is_in_one_walkthrough_and_its_script_is_valid_bash():
    marked = sorted(p.name for p in DOCS.glob("*.md") if MARK in p.read_text())
    listed = [page for pages in WALKTHROUGHS.values() for page in pages]
    assert sorted(listed) == marked, "add the page to docs_blocks.WALKTHROUGHS (or remove its marks)"
    for page in listed:
        todo = steps(marked_blocks(page, (DOCS / page).read_text()))
        assert todo, page
        r = subprocess.run(["bash", "-n", "-c", script(todo)], capture_output=True, text=True)
        assert r.returncode == 0, f"docs/{page}: {r.stderr}"
