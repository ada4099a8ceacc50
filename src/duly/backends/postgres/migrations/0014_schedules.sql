-- 0014_schedules: runtime schedules (app.schedule), one row per name, and the ticks each
-- schedule skipped because its previous job still waited or ran (overlap="skip"), one row per
-- schedule's job key.
CREATE TABLE {schema}.schedules (
    name       text COLLATE "C" PRIMARY KEY,
    task       text COLLATE "C" NOT NULL,
    queue      text COLLATE "C" NOT NULL,
    payload    bytea            NOT NULL,
    priority   integer          NOT NULL,
    every      double precision,
    cron       text COLLATE "C",
    tz         text COLLATE "C" NOT NULL,
    catch_up   text COLLATE "C" NOT NULL,
    overlap    text COLLATE "C" NOT NULL,
    updated_at double precision NOT NULL
);

CREATE TABLE {schema}.skipped_ticks (
    key       text COLLATE "C" PRIMARY KEY,
    count     integer          NOT NULL,
    last_tick double precision NOT NULL
);
