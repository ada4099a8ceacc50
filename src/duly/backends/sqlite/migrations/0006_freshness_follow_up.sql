-- 0006_freshness_follow_up: a touch while a scope's sync runs queues one follow-up delta sync
-- (PRODUCT §17). The row keeps it until that sync ends: its id, its delta payload and its
-- priority; the finish that records the sync's success stores it as the scope's next sync, in
-- the same transaction (a failure or a cancel drops it).
ALTER TABLE freshness ADD COLUMN follow_up TEXT;
ALTER TABLE freshness ADD COLUMN follow_up_payload BLOB;
ALTER TABLE freshness ADD COLUMN follow_up_priority INTEGER NOT NULL DEFAULT 0;
