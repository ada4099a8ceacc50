-- 0010_schedules: runtime schedules (app.schedule), one row per name, and the ticks each
-- schedule skipped because its previous job still waited or ran (overlap="skip"), one row per
-- schedule's job key.
CREATE TABLE schedules (
    name       TEXT    PRIMARY KEY,
    task       TEXT    NOT NULL,
    queue      TEXT    NOT NULL,
    payload    BLOB    NOT NULL,
    priority   INTEGER NOT NULL,
    every      REAL,
    cron       TEXT,
    tz         TEXT    NOT NULL,
    catch_up   TEXT    NOT NULL,
    overlap    TEXT    NOT NULL,
    updated_at REAL    NOT NULL
);

CREATE TABLE skipped_ticks (
    key       TEXT    PRIMARY KEY,
    count     INTEGER NOT NULL,
    last_tick REAL    NOT NULL
);
