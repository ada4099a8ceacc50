-- 0005_webhooks: webhooks (app.create_webhook), one row per hook under the SHA-256 of its
-- secret (the secret itself is never stored): a hit looks its row up by that digest.
CREATE TABLE webhooks (
    digest     TEXT    PRIMARY KEY,
    task       TEXT    NOT NULL,
    queue      TEXT    NOT NULL,
    payload    BLOB    NOT NULL,
    key        TEXT,
    priority   INTEGER NOT NULL,
    delay      REAL    NOT NULL,
    created_at REAL    NOT NULL
);
