-- PostgreSQL named queries: webhook records (by the SHA-256 of their secret). Conventions:
-- README.md beside this file.

-- name: insert_webhook
INSERT INTO {schema}.webhooks (digest, task, queue, payload, key, priority, delay, created_at)
VALUES (%(digest)s, %(task)s, %(queue)s, %(payload)s, %(key)s, %(priority)s, %(delay)s,
        %(created_at)s)
ON CONFLICT (digest) DO NOTHING
RETURNING 1;

-- name: get_webhook
SELECT digest, task, queue, payload, key, priority, delay, created_at
FROM {schema}.webhooks WHERE digest = %(digest)s;

-- name: delete_webhook
DELETE FROM {schema}.webhooks WHERE digest = %(digest)s
RETURNING 1;

-- Dependencies (duly.backends.dependencies, migrations/0015_dependencies.sql: the trigger
-- releases and cancels dependents; these store them and read).
