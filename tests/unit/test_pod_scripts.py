"""What each Pod script runs (its command words, read from its syntax tree by shfmt) is what
manifests.scripts.PROGRAMS declares for it: nothing it runs is undeclared, nothing declared is
unused. tests/integration/test_pod_scripts.py then looks every declared program up in the images
that run the script."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mysql_operator.manifests import scripts
from tests.support import pod_scripts as ps
from tests.support.controlplane import build_binaries

SH = Path(scripts.__file__).parent / "sh"
POSIX = {"exporter.sh"}  # busybox's sh runs it in the exporter image


@pytest.fixture(scope="module", autouse=True)
def shfmt():
    build_binaries("shfmt")


def _words(name: str) -> dict[str, int]:
    return ps.command_words((SH / name).read_text(), "posix" if name in POSIX else "bash")


def _client_tools() -> set[str]:
    """The tools client-tools.sh runs for a Job: the ones its case statement lets through."""
    (allowed,) = re.findall(r"^\s*([a-z][a-z0-9_|-]*)\) ;;$", (SH / "client-tools.sh").read_text(), re.M)
    return set(allowed.split("|"))


def test_every_script_has_its_programs_declared():
    assert set(scripts.PROGRAMS) == {p.name for p in SH.glob("*.sh")}


@pytest.mark.parametrize("name", sorted(scripts.PROGRAMS))
def test_a_script_runs_exactly_the_programs_declared_for_it(name):
    words = _words(name)
    declared = set().union(*scripts.PROGRAMS[name].values())
    dynamic = _client_tools() if name == "client-tools.sh" else set()  # run as "${argv[@]}"
    undeclared = {word: line for word, line in words.items() if word not in declared}
    assert not undeclared, f"{name} runs {undeclared} (program: line), not in manifests.scripts.PROGRAMS"
    assert declared - dynamic == set(words) - dynamic, (
        f"declared for {name} but not run: {declared - set(words)}"
    )
    assert dynamic <= declared, f"client-tools.sh lets through {dynamic - declared}, not declared"


def test_the_client_tools_declared_per_flavor_are_the_ones_the_sidecar_lets_through():
    per_flavor = scripts.PROGRAMS["client-tools.sh"]
    assert set(per_flavor["mysql"]) | set(per_flavor["mariadb"]) == _client_tools()


def test_the_reader_names_programs_behind_wrappers_variables_and_defaults():
    text = """
X="${TOOL:-mysqlbinlog}"
case "$F" in a) Y=mysqladmin ;; b) Y=mariadb-admin ;; esac
f() { hostname; }
exec "$Y" ping
timeout 1 "$X" --version | tail -1
out=$(cksum < /dev/null)
"${argv[@]}"
"""
    assert set(ps.command_words(text)) == {
        "mysqlbinlog",
        "mysqladmin",
        "mariadb-admin",
        "hostname",
        "timeout",
        "tail",
        "cksum",
    }
