-- 0006_webhooks: webhooks (app.create_webhook), one row per hook under the SHA-256 of its
-- secret (the secret itself is never stored): a hit looks its row up by that digest.
CREATE TABLE {schema}.webhooks (
    digest     text             PRIMARY KEY,
    task       text             NOT NULL,
    queue      text             NOT NULL,
    payload    bytea            NOT NULL,
    key        text,
    priority   integer          NOT NULL,
    delay      double precision NOT NULL,
    created_at double precision NOT NULL
);
