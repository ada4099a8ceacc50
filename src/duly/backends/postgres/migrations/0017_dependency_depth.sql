-- 0017_dependency_depth: a dependent's depth (1 + the deepest of its dependencies), stored at
-- enqueue, which refuses one deeper than duly.backends.dependencies.MAX_DEPTH: a failure
-- cancels its dependents one nested trigger call per level. Dependents stored before count
-- as 2 deep (their dependencies' depth was not kept).
ALTER TABLE {schema}.job_waits ADD COLUMN depth integer NOT NULL DEFAULT 2;
