"""Secrets taken out of a text before it is shown (a message, an Event, a status, a log line)."""

from __future__ import annotations

from typing import Iterable


def redact(text: str, secrets: Iterable[str | None]) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, "***")
    return text
