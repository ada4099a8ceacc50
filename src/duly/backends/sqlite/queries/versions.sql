-- SQLite named queries: the migration table, the liveness check, the change counter. Conventions:
-- README.md beside this file.

-- name: migrations_table
CREATE TABLE IF NOT EXISTS duly_migrations (
    version    INTEGER PRIMARY KEY,
    title      TEXT NOT NULL,
    applied_at REAL NOT NULL
);

-- name: migrations_table_exists
SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'duly_migrations';

-- name: migrations_applied
SELECT version FROM duly_migrations ORDER BY version;

-- name: migration_record
INSERT INTO duly_migrations (version, title, applied_at) VALUES (:version, :title, :applied_at);

-- name: ping
SELECT count(*) FROM duly_migrations;

-- name: data_version
PRAGMA data_version;
