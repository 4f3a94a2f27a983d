"""spec.backup.schedule: a cron expression checked as the CRD's pattern checks it, evaluated by
cronsim, with messages that show the bad field's text and the values it takes."""

from __future__ import annotations

import re
from datetime import datetime, timezone

from cronsim import CronSim, CronSimError


# ---------------------------------------------------------------- cron


# cronsim (the evaluator of healthchecks.io) parses and evaluates; we add the @macros, the 5-field
# rule and messages that show the bad field's text and its values (cronsim says only "Bad hour").
CRON_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def _any_case(*words: str) -> str:
    return "|".join("".join(f"[{c.lower()}{c.upper()}]" for c in w) for w in words)


_STEP = "/0*[1-9][0-9]{0,8}"  # cronsim takes any n > 0; nine digits keep CEL's int() in range


def _cron_list(value: str, *extra: str) -> str:
    """A field: items a,b,... each *, a value, a range a-b, with a step /n, or `extra`."""
    item = f"([*]|({value})(-({value}))?)({_STEP})?"
    item = "|".join((item, *extra))
    return f"({item})(,({item}))*"


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_DOW = f"0*[0-7]|{_any_case(*_DAYS)}"
_CRON_FIELDS = (  # our name, cronsim's name, what the field takes, its regular expression
    ("minute", "minute", "0-59", _cron_list("0*[1-5]?[0-9]")),
    ("hour", "hour", "0-23", _cron_list("0*(1?[0-9]|2[0-3])")),
    (
        "day of month",
        "day-of-month",
        "1-31 or L, LW, on a day the months have",
        _cron_list("0*([1-9]|[12][0-9]|3[01])", f"[lL][wW]?({_STEP})?"),
    ),
    ("month", "month", "1-12 or jan-dec", _cron_list(f"0*([1-9]|1[0-2])|{_any_case(*_MONTHS)}")),
    (
        "day of week",
        "day-of-week",
        "0-7 (0 and 7: Sunday) or sun-sat, nL, d#1-5",
        _cron_list(_DOW, "0*[0-7][lL]", f"({_DOW})#0*[1-5]"),
    ),
)
# The CRD's first CEL rule on spec.backup.schedule matches this text (no backslash: the same in a
# CEL string; tests/integration/test_admission_parser_agree.py keeps them equal): what admission
# admits is what check_cron's first step admits. Two more rules there check what cronsim checks
# beyond it: a range's start not above its end, a day of month that one of the months has.
CRON_PATTERN = (
    f"^(@({'|'.join(m[1:] for m in CRON_MACROS)})|" + " ".join(f"({f[3]})" for f in _CRON_FIELDS) + ")$"
)

# cronsim 2.8 reads a range of one value with a step (5-5/2) as 5/2 (5, 7, ..., 59); cron means 5
_ONE_VALUE_RANGE = re.compile(r"\b(\w+)-\1/0*[1-9][0-9]*\b", re.IGNORECASE)
_HINT = "as a value, a list a,b, a range a-b (a <= b) or a step */n, a-b/n (n > 0)"


def check_cron(expr: str) -> str:
    """The 5-field form of a cron expression (a macro expanded); ValueError naming the bad part."""
    if expr in CRON_MACROS:
        return CRON_MACROS[expr]
    parts = expr.split(" ")
    if len(parts) != 5:
        raise ValueError(
            f"{expr!r} must have 5 fields separated by single spaces (minute hour day-of-month month "
            f"day-of-week) or be one of {', '.join(CRON_MACROS)}"
        )
    for text, (name, _, values, pattern) in zip(parts, _CRON_FIELDS):
        if not re.fullmatch(pattern, text):
            raise ValueError(f"{name} {text!r} is not valid: {values}, {_HINT}")
    five = _ONE_VALUE_RANGE.sub(r"\1", expr)
    try:
        CronSim(five, datetime(2000, 1, 1, tzinfo=timezone.utc))
    except CronSimError as e:
        for text, (name, theirs, values, _) in zip(parts, _CRON_FIELDS):
            if str(e) == f"Bad {theirs}":
                raise ValueError(f"{name} {text!r} is not valid: {values}, {_HINT}") from None
        raise ValueError(f"{expr!r}: {e}") from None
    return five
