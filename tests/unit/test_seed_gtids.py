"""seed.sh's union of the donor's binary log state and the copy's position (run by bash: the
function alone, no server). The copy's position must come last per domain: MariaDB makes the last
GTID of a domain in gtid_binlog_state its gtid_binlog_pos (checked on 10.11: '0-2-5,0-1-9' gives
0-1-9, '0-1-9,0-2-5' gives 0-2-5), and the operator repoints an instance that is no replica from
its gtid_binlog_pos. A re-seeded replica once restarted replication from an older GTID of the
old primary's and stopped on a duplicate key."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SEED_SH = Path(__file__).resolve().parents[2] / "mysql_operator" / "manifests" / "sh" / "seed.sh"


def union(state: str, pos: str) -> str:
    text = SEED_SH.read_text()
    function = text[text.index("union_gtids() {") : text.index("\n}\n", text.index("union_gtids() {")) + 3]
    script = f'die() {{ echo "die: $*" >&2; exit 1; }}\n{function}\nunion_gtids "$1" "$2"'
    r = subprocess.run(["bash", "-c", script, "seed", state, pos], capture_output=True, text=True, check=True)
    return r.stdout


@pytest.mark.parametrize(
    "state, pos, expected_last",
    [
        ("0-1-82904,0-2-38283,0-3-69720", "0-1-82904", ["0-1-82904"]),
        ("0-3-69720,0-1-82000", "0-1-82904", ["0-1-82904"]),
        ("0-3-5,1-2-7,0-4-2", "0-4-9,1-2-8", ["0-4-9", "1-2-8"]),
        ("", "0-1-3", ["0-1-3"]),
    ],
)
def test_the_copys_position_is_last_in_each_domain_and_the_union_keeps_the_highest(state, pos, expected_last):
    out = union(state, pos).split(",")
    assert out[-len(expected_last) :] == expected_last
    best: dict[tuple[str, str], int] = {}
    for g in [g for g in (state + "," + pos).split(",") if g]:
        d, s, n = g.split("-")
        best[(d, s)] = max(best.get((d, s), 0), int(n))
    assert sorted(out) == sorted(f"{d}-{s}-{n}" for (d, s), n in best.items())


def test_a_list_that_is_not_gtids_is_refused():
    with pytest.raises(subprocess.CalledProcessError) as e:
        union("0-1-2,x;y", "0-1-3")
    assert "not a GTID from the donor" in e.value.stderr
