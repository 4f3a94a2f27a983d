"""`mysql-operator` command line."""

from __future__ import annotations

import argparse
import sys

from mysql_operator import __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mysql-operator")
    parser.add_argument("--version", action="version", version=f"mysql-operator {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print the version")
    args = parser.parse_args(argv)
    if args.command == "version":
        print(__version__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
