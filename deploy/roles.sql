-- Run once, as a superuser, in the memory database (deploy/initdb.sh runs it when the
-- primary's data directory is first made). psql variables: memory_password,
-- replication_password. docs/scaling.md, "Runbook: the role and the schema".

-- The role the workers log in as: it owns the database, so it creates and changes the
-- product's tables (every worker start runs the schema code, idempotent), and nothing else.
CREATE ROLE memory LOGIN PASSWORD :'memory_password';
ALTER DATABASE memory OWNER TO memory;
-- Extensions the product needs; `vector` is not a trusted extension, so a superuser
-- creates both here and the workers' CREATE EXTENSION IF NOT EXISTS finds them.
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;
-- A replica's WAL receiver state (is it streaming?) is shown only to this role's
-- members: without it every replica is skipped, with a warning that says so.
GRANT pg_read_all_stats TO memory;
-- The replica's copy and stream (pg_basebackup -R, primary_conninfo).
CREATE ROLE replicator LOGIN REPLICATION PASSWORD :'replication_password';
