"""kopf wiring only: each handler maps a kopf event to one call (the cluster pass, the backup
controller, the SQL objects)."""
