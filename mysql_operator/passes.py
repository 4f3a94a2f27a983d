"""Running clusters' passes: at most `slots` at a time, and none holding a slot past its deadline.

A pass (Reconciler.tick) talks to a tenant's servers and to the API server; one that waits long
(hung servers, a drip-feeding one) must not hold a thread the other clusters' failovers need. Past
`deadline` seconds it gives its slot up and runs on in a spare thread of the pool - the caller
waits for it, so one cluster never has two passes - and `report(body, deadline)` tells the cluster
(then `report(body, None)` when it ends). Threads are reused; the pool only grows while passes are
overdue, up to OVERDUE_THREADS_PER_SLOT per slot (beyond that a pass waits for a thread)."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Mapping, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")
OVERDUE_THREADS_PER_SLOT = 5


def where(thread: int | None) -> str:
    """The innermost frames of a thread (code positions only: no values)."""
    frame = sys._current_frames().get(thread) if thread is not None else None
    return "".join(traceback.format_stack(frame)[-8:]) if frame else "(not started: no thread free)"


class Passes:
    def __init__(
        self, slots: int, deadline: float, report: Callable[[Mapping[str, Any], float | None], None]
    ):
        self.pool = ThreadPoolExecutor(
            max_workers=slots * OVERDUE_THREADS_PER_SLOT, thread_name_prefix="cluster-pass"
        )
        self.deadline = deadline
        self.report = report
        self._slots = asyncio.Semaphore(slots)

    async def run(self, body: Mapping[str, Any], work: Callable[[], T]) -> T:
        """`work()` (one pass over the cluster of `body`) in the pool, within the slots."""
        loop = asyncio.get_running_loop()
        thread: list[int] = []

        def started() -> T:
            thread.append(threading.get_ident())
            return work()

        async with self._slots:
            running = loop.run_in_executor(self.pool, started)
            done, _ = await asyncio.wait({running}, timeout=self.deadline)
        if done:
            return running.result()
        meta = body.get("metadata") or {}
        log.warning(
            "%s/%s: the pass has run for more than %g s and runs on without a slot; where it waits:\n%s",
            meta.get("namespace"),
            meta.get("name"),
            self.deadline,
            where(thread[0] if thread else None),
        )
        await self._report(loop, body, self.deadline)
        try:
            return await running
        finally:
            await self._report(loop, body, None)

    async def _report(self, loop, body: Mapping[str, Any], seconds: float | None) -> None:
        try:
            await loop.run_in_executor(self.pool, self.report, body, seconds)
        except Exception:  # noqa: BLE001 - the API server's: logged, the pass goes on
            meta = body.get("metadata") or {}
            log.exception(
                "%s/%s: the overdue pass could not be reported", meta.get("namespace"), meta.get("name")
            )

    def shutdown(self, wait: bool = True) -> None:
        self.pool.shutdown(wait=wait)
