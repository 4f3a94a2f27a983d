"""Everything the operator says to a MySQL or MariaDB server (all SQL goes through pymysql).

`flavor` holds every statement that differs between the flavors, `gtid` the pure GTID arithmetic,
`instance` one server's operations (over one bounded connection, `session`; by concern in
`replica_control`, `fencing`, `server_binlogs`, `clone`, `server_accounts`).
"""
