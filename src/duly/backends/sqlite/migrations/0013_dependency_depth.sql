-- 0013_dependency_depth: a dependent's depth (1 + the deepest of its dependencies), stored at
-- enqueue, which refuses one deeper than duly.backends.dependencies.MAX_DEPTH: a failure
-- cancels its dependents one trigger level per level, and SQLite stops at 1000 levels.
-- Dependents stored before count as 2 deep (their dependencies' depth was not kept).
ALTER TABLE job_waits ADD COLUMN depth INTEGER NOT NULL DEFAULT 2;
