-- SQLite named queries: duly groups (app.group) and their callbacks. Conventions: README.md beside
-- this file.

-- name: group_members
-- In the enqueue_group transaction, after the jobs: mark the members (ids: a JSON list).
UPDATE jobs SET group_id = :group WHERE id IN (SELECT value FROM json_each(:ids));

-- name: group_callback_waits
-- The callback was inserted `scheduled` for +inf: no due time at all from now on.
UPDATE jobs SET scheduled_for = NULL, position = enqueued_at WHERE id = :group;

-- name: insert_group
-- :members is the JSON list of the member ids for a named group, else NULL (0007).
INSERT INTO groups (id, key, created_at, total, pending, retention, has_callback, name, members)
VALUES (:id, :key, :created_at, :total, :total, :retention, :has_callback, :name, :members);

-- name: group_named
-- enqueue_group, before storing anything: the stored group of this name, with its members.
SELECT id, members FROM groups WHERE name = :name;

-- name: get_group
-- By id, or by name (a name never has the form of a generated id: duly._groups refuses it).
SELECT id, key, created_at, total, succeeded, failed, cancelled, completed_at, has_callback,
       first_completed_at, name
FROM groups WHERE id = :id
UNION ALL
SELECT id, key, created_at, total, succeeded, failed, cancelled, completed_at, has_callback,
       first_completed_at, name
FROM groups WHERE name = :id
LIMIT 1;

-- name: purge_groups
-- Groups complete for longer than their retention, with their counted members.
DELETE FROM group_settled
WHERE group_id IN (SELECT id FROM groups INDEXED BY groups_expire WHERE expire_at <= :now);
DELETE FROM groups WHERE expire_at <= :now;


-- Webhooks (0005_webhooks.sql).
