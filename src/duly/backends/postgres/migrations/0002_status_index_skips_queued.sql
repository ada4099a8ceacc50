-- 0002_status_index_skips_queued: keep the planner on jobs_ready when claiming.
--
-- With millions of finished rows, ANALYZE's sample finds (almost) no queued row, and the planner
-- then claimed through jobs_status (status, id) — reading every queued row of every queue and
-- sorting them — instead of the partial jobs_ready index (bench/pg_finished_rows.py: claim+finish
-- at 0.4x of an empty schema). Excluding queued rows from jobs_status leaves jobs_ready as the
-- only index that can answer "status = 'queued'"; listing queued jobs goes through it too.

DROP INDEX {schema}.jobs_status;
CREATE INDEX jobs_status ON {schema}.jobs (status, id) WHERE status <> 'queued';
