"""What the decision's rules read (rules.py): the instances by name, those the spec wants and those
that answer (`View`), and once the primary serves, the others sorted into errant, re-seeding,
healthy and silent (`Serving`). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from mysql_operator import histories as h
from mysql_operator.topology import (
    InstanceState,
    Settings,
)


@dataclass(frozen=True)
class View:
    """What every rule reads: the instances, by name, those wanted by the spec, those that answer."""

    instances: Sequence[InstanceState]
    settings: Settings
    current_primary: str | None
    desired_primary: str | None
    by_name: Mapping[str, InstanceState]
    wanted: list[InstanceState]
    reachable: list[InstanceState]

    @classmethod
    def of(
        cls,
        instances: Sequence[InstanceState],
        settings: Settings,
        current_primary: str | None,
        desired_primary: str | None,
    ) -> "View":
        return cls(
            instances,
            settings,
            current_primary,
            desired_primary,
            h.by_name(instances),
            [i for i in instances if i.ordinal < settings.instances],
            [i for i in instances if i.reachable],
        )


@dataclass(frozen=True)
class Serving:
    """The others, once the primary serves: errant ones (why), ones being re-seeded, healthy
    replicas, the wanted instances that do not answer."""

    p: InstanceState
    errant: Mapping[str, str]
    reseeding: list[InstanceState]
    healthy_replicas: list[InstanceState]
    degraded: tuple[str, ...]
    in_range: list[InstanceState]  # the healthy replicas spec.instances wants

    @classmethod
    def of(cls, v: View, p: InstanceState) -> "Serving":
        errant: dict[str, str] = {}
        for i in v.reachable:
            if i.name != p.name and not i.reseeding:
                diverged = h.errant_against_primary(i, p, v.settings)
                if diverged and not h.only_behind(i, p):
                    errant[i.name] = diverged
        healthy = [i for i in v.reachable if i.name != p.name and i.name not in errant and not i.reseeding]
        return cls(
            p,
            errant,
            [i for i in v.reachable if i.name != p.name and i.reseeding],
            healthy,
            tuple(i.name for i in sorted(v.wanted, key=lambda i: i.ordinal) if not i.reachable),
            [i for i in healthy if i.ordinal < v.settings.instances],
        )
