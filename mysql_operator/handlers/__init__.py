"""kopf wiring only: each handler calls into mysql_operator.reconcile."""
