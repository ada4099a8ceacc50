-- 0012_progress: a running job's progress and checkpoint (PRODUCT §16), written with the
-- heartbeat (duly.backends.progress): JSON {"fraction", "message", "at"} and the JSON cursor
-- its next run resumes from; an event of the stream may carry a progress (a `progress` event).
ALTER TABLE jobs ADD COLUMN progress BLOB;
ALTER TABLE jobs ADD COLUMN cursor BLOB;
ALTER TABLE events ADD COLUMN progress BLOB;
