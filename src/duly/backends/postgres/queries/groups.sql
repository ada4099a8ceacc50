-- PostgreSQL named queries: duly groups (app.group) and their callbacks. Conventions: README.md
-- beside this file.

-- name: group_store
-- Second statement of enqueue_group, after `enqueue` stored the members and the callback (the
-- callback `scheduled` for +inf): mark the members, take the callback's due time away (no
-- promotion reads a NULL scheduled_for), store the group. No status changes: no event.
WITH members AS (
    UPDATE {schema}.jobs j SET group_id = %(id)s
    WHERE j.id = ANY(%(members)s::text[])
    RETURNING 1
),
waits AS (
    UPDATE {schema}.jobs j SET scheduled_for = NULL
    WHERE j.id = %(id)s AND %(has_callback)s
    RETURNING 1
)
INSERT INTO {schema}.groups (id, key, created_at, total, pending, retention, has_callback)
SELECT %(id)s, %(key)s, %(created_at)s, %(total)s, %(total)s, %(retention)s, %(has_callback)s
WHERE (SELECT count(*) FROM members) = %(total)s;

-- name: group_name_take
-- First statement of a named group's enqueue_group (0011): its row, unless a stored group has
-- the name (a concurrent store of it waits here for the first to commit). Returns its id when
-- inserted; then the members are stored and marked (group_mark).
INSERT INTO {schema}.groups
    (id, key, created_at, total, pending, retention, has_callback, name, members)
VALUES (%(id)s, %(key)s, %(created_at)s, %(total)s, %(total)s, %(retention)s, %(has_callback)s,
        %(name)s, %(members)s::text[])
ON CONFLICT (name) WHERE name IS NOT NULL DO NOTHING
RETURNING id;

-- name: group_named
-- The stored group of this name (group_name_take found it), with its members.
SELECT id, members FROM {schema}.groups WHERE name = %(name)s;

-- name: group_mark
-- A named group's last statement, after its row and its jobs: mark the members, take the
-- callback's due time away. Returns how many members it marked.
WITH waits AS (
    UPDATE {schema}.jobs j SET scheduled_for = NULL
    WHERE j.id = %(id)s AND %(has_callback)s
    RETURNING 1
)
UPDATE {schema}.jobs j SET group_id = %(id)s
WHERE j.id = ANY(%(members)s::text[]);

-- name: get_group
-- By id, or by name (a name never has the form of a generated id: duly._groups refuses it).
SELECT id, key, created_at, total, succeeded, failed, cancelled, completed_at, has_callback,
       first_completed_at, name
FROM {schema}.groups WHERE id = %(id)s OR name = %(id)s
LIMIT 1;
