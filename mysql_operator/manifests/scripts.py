"""Shell scripts shipped in the cluster's ConfigMap and run inside the server image.

They are constant text: everything that varies comes from environment variables set by the
StatefulSet (flavor, pod identity, credentials from the Secret). They never print a password and
never use `set -x`. Paths can be overridden by environment (tests run them against a local server).

The scripts are the files in sh/ (package data, checked by shellcheck: `make lint`).
"""

from importlib.resources import files


def _script(name: str) -> str:
    return files(__package__).joinpath("sh", name).read_text(encoding="utf-8")


# Initialise an EMPTY data directory, once, explicitly. An existing data directory is never touched.
# The new directory is built under a staging name and renamed when complete, so a crash midway
# never leaves a half-initialised directory that a server would later start on.
INIT_SH = _script("init.sh")

# Start the server with the ConfigMap's my.cnf plus this instance's identity (from the pod ordinal).
START_SH = _script("start.sh")

# Probes. alive: the server process answers (even "access denied" means alive).
# ready: the operator's account can run a query over the local socket.
PROBE_SH = _script("probe.sh")

# MariaDB re-seeding by a physical copy: the donor sidecar (serve), the recipient's init container
# (receive); see the script's header.
SEED_SH = _script("seed.sh")

# The metrics sidecar: mysqld_exporter as the monitoring account, started again when its password
# is rotated (see the script's header).
EXPORTER_SH = _script("exporter.sh")


# The backup and restore Jobs' `client-tools` sidecar (a native sidecar in the cluster's server
# image): runs the client tools the Job's main container asks for in sub-folders of the shared
# folder $1 (see backup/sidecar.py) - each run reads its input from the FIFO `stdin`, writes into
# the FIFOs `stdout` and `stderr`, and its exit status into `status` - until the Pod ends. It runs
# only the tools backup/sidecar.py's TOOLS names, and never prints their arguments.
CLIENT_TOOLS_SH = _script("client-tools.sh")


# The programs each script runs besides its shell's builtins, by flavor ("" for both): the image
# that runs it must have every one. init.sh, start.sh, probe.sh and (MariaDB) seed.sh run in the
# server image (spec.image: the user's, official ones included), exporter.sh in the exporter
# image, client-tools.sh in the tool image of the servers' series (it runs the tools a Job asks
# for, listed here by flavor). tests/unit/test_pod_scripts.py checks this against each script's
# command words; tests/integration/test_pod_scripts.py looks each one up in every such image.
PROGRAMS: dict[str, dict[str, tuple[str, ...]]] = {
    "init.sh": {
        "": ("mkdir", "mv", "rm", "sed"),
        "mysql": ("mysqld",),
        "mariadb": ("mariadb-install-db", "mariadbd"),
    },
    "start.sh": {
        "": ("cat", "mkdir", "mv", "rm", "sed", "timeout"),
        "mysql": ("mysqld", "mysql"),
        "mariadb": ("mariadbd", "mariadb"),
    },
    "probe.sh": {"mysql": ("mysqladmin", "mysql"), "mariadb": ("mariadb-admin", "mariadb")},
    "seed.sh": {
        "mariadb": (
            "awk",
            "cat",
            "cut",
            "du",
            "mariadb",
            "mariadb-backup",
            "mbstream",
            "mkdir",
            "mkfifo",
            "mktemp",
            "mv",
            "rm",
            "sleep",
            "socat",
            "tail",
        ),
    },
    "exporter.sh": {"": ("cat", "md5sum", "mysqld_exporter", "sleep")},
    "client-tools.sh": {
        "": ("mkdir", "mv", "sleep"),
        "mysql": ("mysqldump", "mysql", "mysqlbinlog", "mysqld", "tar"),
        "mariadb": (
            "mariadb-dump",
            "mariadb",
            "mariadb-binlog",
            "tar",
            "mbstream",
            "mariadb-backup",
            "mariadbd",
        ),
    },
}
