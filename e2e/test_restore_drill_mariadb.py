"""Issue 49 on the local cluster, MariaDB: restore drills - a scheduled one measured by a real
Prometheus, then drills of a damaged backup failing, each naming what was wrong
(e2e/drill_scenario.py says what it does)."""

from __future__ import annotations

import pytest

from e2e.drill_scenario import drill_scenario

# late_build: the real Prometheus is a binary `make test` builds beside the tests
pytestmark = [pytest.mark.cluster, pytest.mark.late_build]


def test_a_drill_restores_the_newest_backup_and_its_binlogs_and_a_damaged_backup_fails_it_mariadb(
    local_cluster, scenario_namespace, s3_beside_cluster, tmp_path
):
    drill_scenario(local_cluster, scenario_namespace, s3_beside_cluster, tmp_path, "mariadb")
