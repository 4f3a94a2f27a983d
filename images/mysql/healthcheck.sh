#!/bin/sh
# Liveness-style check: exits 0 while the server answers on its socket (even before any account
# exists, as `mysqladmin ping` counts "access denied" as alive). Usage: healthcheck.sh
exec mysqladmin --no-defaults --protocol=socket --socket=/var/run/mysqld/mysqld.sock \
  --connect-timeout=5 ping --silent
