"""A real Prometheus for the tests: the binary `hack/build-binaries.sh prometheus` builds from its Go
module (PROMETHEUS_VERSION), run as a host process on loopback with a configuration the test
generates, and its HTTP API (instant queries, rules, targets)."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.support.controlplane import bin_dir, build_binaries, versions
from tests.support.ports import free_port
from tests.support.wait import wait_for


def home() -> Path:
    return bin_dir() / f"prometheus-{versions()['PROMETHEUS_VERSION']}"


def ensure_built() -> None:
    """prometheus and promtool, built (or waited for) by `hack/build-binaries.sh prometheus`."""
    build_binaries("prometheus")


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(home() / "promtool"), *args], capture_output=True, text=True, timeout=120)


class QueryError(AssertionError):
    pass


@dataclass
class Prometheus:
    root: Path  # config, rules and the TSDB
    config: dict[str, Any]
    rules: dict[str, Any] | None = None
    port: int = 0
    proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> "Prometheus":
        self.root.mkdir(parents=True, exist_ok=True)
        config = dict(self.config)
        if self.rules is not None:
            rules_file = self.root / "rules.yaml"
            rules_file.write_text(yaml.safe_dump(self.rules, sort_keys=False))
            config["rule_files"] = [str(rules_file)]
        (self.root / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        self.port = free_port()
        self.log = open(self.root / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            [
                str(home() / "prometheus"),
                f"--config.file={self.root / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.root / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=2h",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        wait_for(self._ready, timeout, "Prometheus ready", describe=self.log_tail)
        return self

    def _ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"Prometheus exited ({self.proc.returncode}): {self.log_tail()}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return (self.root / "prometheus.log").read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "log", None):
            self.log.close()

    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path>: its `data`; a query Prometheus refuses raises QueryError with its error."""
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                body = json.load(r)
        except urllib.error.HTTPError as e:
            body = json.load(e)
        if body.get("status") != "success":
            raise QueryError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, promql: str) -> list[tuple[dict[str, str], float]]:
        """An instant query's vector: (labels, value) per series."""
        data = self.api("query", query=promql)
        if data["resultType"] == "scalar":
            return [({}, float(data["result"][1]))]
        return [(s["metric"], float(s["value"][1])) for s in data["result"]]

    def value(self, promql: str) -> float | None:
        """The value of a query that returns at most one series; None when it returns none."""
        result = self.query(promql)
        if len(result) > 1:
            raise AssertionError(f"{promql}: {len(result)} series, expected one: {result}")
        return result[0][1] if result else None
