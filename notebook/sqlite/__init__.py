"""The fast path's SQLite machinery (``notebook.transactions`` explains it): the write queue and
write connection per database file (``files``), the group sync of the log (``group_sync``),
the checkpointer (``checkpointer``), and the check that the search index's triggers exist
(``triggers``). ``CODEX_FAST_PATH=0`` leaves all but the triggers unused: writes are then
plain ``transaction.atomic`` blocks and SQLite syncs each commit itself (synchronous=FULL).
"""
