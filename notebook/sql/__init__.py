"""The fast path's SQL: statements built once per database from the models' metadata and
sent straight to the driver, giving exactly what the equivalent querysets give.

- ``driver``: the driver call (``run``), with Django's checks and error wrapping.
- ``converters``: values to and from the database, and rows made into instances.
- ``cache``: the one build-once-per-database cache (``PerDatabase``).
- ``statements``: point reads by key, inserts, row updates.
- ``usage``: the quota charge.
- ``writes``: on PostgreSQL, a save and an update as one statement each.
- ``search``: the search's candidate statements, rendered once per filter shape.

Only ``notebook.store`` (the services' and selectors' one door to the database) and
``authserver.core.token_check`` use these; ``notebook.orm`` holds the plain ORM versions that
``CODEX_FAST_PATH=0`` selects instead (docs/architecture.md).
"""
