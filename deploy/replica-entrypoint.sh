#!/bin/sh
# A streaming read replica of postgres-primary: on an empty data directory, a copy of the
# primary by pg_basebackup -R (standby.signal and primary_conninfo written for us), then
# Postgres as a hot standby. Runs as the postgres image's `postgres` user.
set -eu
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  until pg_isready -h postgres-primary -p 5432 -U replicator; do sleep 2; done
  PGPASSWORD="$REPLICATION_PASSWORD" pg_basebackup -h postgres-primary -p 5432 -U replicator \
    -D "$PGDATA" -R -X stream -c fast
  chmod 0700 "$PGDATA"
fi
exec postgres -D "$PGDATA" -c hot_standby=on
