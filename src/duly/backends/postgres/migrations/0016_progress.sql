-- 0016_progress: a running job's progress and checkpoint (PRODUCT §16), written with the
-- heartbeat (duly.backends.progress): JSON {"fraction", "message", "at"} and the JSON cursor
-- its next run resumes from; an event of the stream may carry a progress (a `progress` event,
-- inserted by store_progress, not by a trigger: no status changes).
ALTER TABLE {schema}.jobs ADD COLUMN progress bytea;
ALTER TABLE {schema}.jobs ADD COLUMN cursor bytea;
ALTER TABLE {schema}.events ADD COLUMN progress bytea;
