-- PostgreSQL named queries: the migration runner's version table, and the liveness check.
-- Conventions: README.md beside this file.

-- name: create_version_table
-- Run by the migration runner (no parameters; two statements).
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.schema_version (
    version    integer     PRIMARY KEY,
    title      text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: applied_versions
SELECT version FROM {schema}.schema_version ORDER BY version;

-- name: record_version
INSERT INTO {schema}.schema_version (version, title) VALUES (%(version)s, %(title)s);

-- name: schema_exists
SELECT to_regclass(%(table)s) IS NOT NULL;

-- name: drop_schema
DROP SCHEMA IF EXISTS {schema} CASCADE;

-- name: ping
SELECT 1;
