"""The unit tier: pure rules that need no backend and no service (serialization, key
templates, rates, backoff, URL parsing, ids, schedule maths). ``make test`` runs it first, in
seconds, before the suites that start services."""
