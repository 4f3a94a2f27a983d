"""Sizes in words, as status and the CLI show them. Pure."""

from __future__ import annotations

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def human_size(n: int) -> str:
    """Bytes in binary units with one decimal (1536 -> "1.5 KiB"; under 1 KiB: "512 B")."""
    value, unit = float(n), 0
    while value >= 1024 and unit < len(_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    return f"{n} B" if unit == 0 else f"{value:.1f} {_UNITS[unit]}"
