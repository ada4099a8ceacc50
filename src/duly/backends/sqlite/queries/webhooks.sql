-- SQLite named queries: webhook records (by the SHA-256 of their secret). Conventions: README.md
-- beside this file.

-- name: insert_webhook
INSERT INTO webhooks (digest, task, queue, payload, key, priority, delay, created_at)
VALUES (:digest, :task, :queue, :payload, :key, :priority, :delay, :created_at)
ON CONFLICT (digest) DO NOTHING;

-- name: get_webhook
SELECT digest, task, queue, payload, key, priority, delay, created_at
FROM webhooks WHERE digest = :digest;

-- name: delete_webhook
DELETE FROM webhooks WHERE digest = :digest;

-- Dependencies (duly.backends.dependencies, migrations/0011_dependencies.sql: the triggers
-- release and cancel dependents; these store them and read).
