-- 0008_paused_queues: paused queues (app.pause), one row each; the claim transaction reads
-- them and takes no job of a paused queue.
CREATE TABLE paused_queues (
    queue     TEXT PRIMARY KEY,
    paused_at REAL NOT NULL
);
