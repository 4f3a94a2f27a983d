#!/bin/sh
# Liveness-style check: exits 0 while the server answers on its socket (even before any account
# exists, as `mariadb-admin ping` counts "access denied" as alive). Usage: healthcheck.sh
exec mariadb-admin --no-defaults --protocol=socket --socket=/run/mysqld/mysqld.sock \
  --connect-timeout=5 ping --silent
