-- 0008_text_collate_c: every text column of the schema compares bytewise (COLLATE "C").
--
-- Every btree insert and lookup on a text key (the jobs primary key on each enqueue, the ready
-- index's queue, the ids a finish looks up...) compared strings with the database's collation
-- (strcoll: NUL-terminated copies of both strings, then the locale's rules, and no abbreviated
-- keys), even under C.UTF-8. Measured on a bulk insert of 1,000 jobs (EXPLAIN ANALYZE, server
-- time, docs/benchmarks.md): 17.8 ms -> 11.3 ms; claim and finish 2-7 % faster.
--
-- Nothing duly stores needs linguistic order: ids (ULIDs) and queue, task, key, gate names are
-- matched for equality, and ordered only to walk them in a fixed order (pages, lock order).
-- Byte order is code point order in UTF-8, which is C.UTF-8's order, so on such a database no
-- ORDER BY changes; under another collation, names that differ only in case or accents now
-- sort by code point. All text columns change together: comparing two columns with different
-- collations is an error.
--
-- Same type: no table rewrite, but the indexes on these columns are rebuilt, holding the
-- tables' locks meanwhile (seconds per million jobs).

DO $$
DECLARE
    t record;
BEGIN
    FOR t IN
        SELECT c.oid::regclass AS rel,
               string_agg(format('ALTER COLUMN %I TYPE text COLLATE "C"', a.attname), ', '
                          ORDER BY a.attnum) AS alters
        FROM pg_class c
        JOIN pg_attribute a ON a.attrelid = c.oid
        WHERE c.relnamespace = '{schema}'::regnamespace AND c.relkind = 'r'
          AND a.attnum > 0 AND NOT a.attisdropped AND a.atttypid = 'text'::regtype
          AND a.attcollation <> 'pg_catalog."C"'::regcollation
        GROUP BY c.oid
        ORDER BY c.oid
    LOOP
        EXECUTE format('ALTER TABLE %s %s', t.rel, t.alters);
    END LOOP;
END $$;
