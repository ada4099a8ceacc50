-- 0012_paused_queues: a paused queue (app.pause) has paused_at set. The claim statement locks
-- the rows of the queues it reads FOR SHARE, which a pause (an UPDATE) waits for and which
-- waits for a pause: a claim committed after a pause returned saw it.
ALTER TABLE {schema}.queues ADD COLUMN paused_at double precision;
