"""The binlog archiver's health and metrics server (`mysql-operator backup archive-binlogs
--health-port`): its readiness probe and the gauges the chart's PodMonitor scrapes."""

from __future__ import annotations


class Health:
    """The archiver's readiness (GET /healthz: a pass archived from the primary within `grace`
    seconds) and metrics (GET /metrics, Prometheus' text format, for the chart's PodMonitor):

    - mysql_binlog_archive_delay_seconds (gauge): how long the oldest transaction the primary
      wrote and the bucket lacks has waited (as first seen by a pass; 0 when the bucket holds
      all). Under writes it stays near max_delay plus an upload; it grows while nothing is
      archived (no primary, uploads failing): what was pending stays pending from then on, until
      a pass from a primary uploads again or finds nothing left to archive;
    - mysql_binlog_archive_max_delay_seconds (gauge): spec.backup.binlogs.maxDelaySeconds;
    - mysql_binlog_archive_streaming (gauge): 1 while ready (as /healthz)."""

    def __init__(self, grace: float, max_delay: float = 10.0):
        import time

        self.grace, self.max_delay, self.clock = grace, max_delay, time.monotonic
        self.ok_at: float | None = None
        # the oldest transaction the bucket lacks, first seen then (None: it lacks none); from the
        # start until a pass says: nothing known is archived yet
        self.oldest: float | None = self.clock()
        self.carried: float | None = self.oldest  # pending across passes that archived nothing

    def passed(self, ok: bool, step=None) -> None:
        """After each pass (binlog_stream.follow): ok and its Step (binlog_archive.Step)."""
        now = self.clock()
        if ok:
            self.ok_at = now
        behind = step.behind_since if ok and step is not None else None
        if ok and (self.carried is None or behind is None or (step is not None and step.uploaded)):
            # the archive is contiguous: a pass that uploads covers the oldest transactions pending
            self.carried, self.oldest = None, behind
        elif not ok and self.carried is None:
            self.carried = self.oldest if self.oldest is not None else now
            self.oldest = self.carried

    def healthy(self) -> bool:
        return self.ok_at is not None and self.clock() - self.ok_at <= self.grace

    def delay(self) -> float:
        return 0.0 if self.oldest is None else self.clock() - self.oldest

    def metrics(self) -> bytes:
        from prometheus_client import CollectorRegistry, Gauge, generate_latest

        registry = CollectorRegistry()
        for name, doc, value in (
            (
                "delay_seconds",
                "Seconds since the bucket held every transaction the primary wrote",
                self.delay(),
            ),
            ("max_delay_seconds", "spec.backup.binlogs.maxDelaySeconds", self.max_delay),
            ("streaming", "1 while archiving from the primary (the Pod's readiness)", float(self.healthy())),
        ):
            Gauge(f"mysql_binlog_archive_{name}", doc, registry=registry).set(value)
        return generate_latest(registry)

    def serve(self, port: int) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        health = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the library's name
                status, kind = 200, "text/plain"
                if self.path == "/metrics":
                    body, kind = health.metrics(), "text/plain; version=0.0.4"
                elif self.path == "/healthz" and health.healthy():
                    body = b"archiving\n"
                else:
                    status, body = 503, b"not archiving: see this container's log\n"
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:  # the probe every few seconds is no news
                pass

        server = ThreadingHTTPServer(("", port), Handler)
        threading.Thread(target=server.serve_forever, daemon=True, name="health").start()
