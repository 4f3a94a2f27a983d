"""`kubectl mysql`: the user commands of `mysql-operator` as a kubectl plugin (the executable
`kubectl-mysql` on PATH; plugins/krew/mysql.yaml). The same commands and code as `mysql-operator`
(cli.py, cli_backup.py) without the operator's own (run, check-install) and the Jobs'."""

from __future__ import annotations

import sys

from mysql_operator.cli import build_parser
from mysql_operator.cli_common import call


def main(argv: list[str] | None = None) -> int:
    args = build_parser("kubectl mysql", internal=False).parse_args(argv)
    return call(args)


if __name__ == "__main__":
    sys.exit(main())
