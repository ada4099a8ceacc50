-- 0009_freshness_decision_in_python: a freshness request is decided in Python.
--
-- fresh_request (0004) decided a request in PL/pgSQL, a second copy of the rule SQLite applies
-- in Python (duly._freshness_state). The backend now locks the scopes' rows in a transaction
-- (fresh_lock in freshness.sql), applies duly._freshness_state.apply_request and stores the
-- sync jobs and the rows (the enqueue plan, fresh_store): the function is no longer called.
-- fresh_after and its helpers stay: finish, recover and fresh_cancelled call them in the
-- statement that ends a sync job; a later migration replaces them under the same names.

DROP FUNCTION {schema}.fresh_request(
    text, text, text, boolean, double precision, double precision, double precision,
    double precision, double precision, text, text, text, integer, text, integer, bytea, bytea,
    double precision, text);
