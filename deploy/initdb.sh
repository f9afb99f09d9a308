#!/bin/sh
# The primary's first start (the postgres image runs /docker-entrypoint-initdb.d/*.sh
# once, on an empty data directory): the role, the extensions, replication access.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v memory_password="$MEMORY_DB_PASSWORD" -v replication_password="$REPLICATION_PASSWORD" \
  -f /etc/memory/roles.sql
# Replicas copy and stream as `replicator`, from the private network only.
echo "host replication replicator samenet scram-sha-256" >> "$PGDATA/pg_hba.conf"
