"""What every app may use and that uses no app: the site's origins, how a database outage is
logged, and the register of the Django, DOT and SDK internals the code relies on
(``common.internals``). It imports no app and no ``codex_site`` module: the arrows between
the layers run one way (codex_site -> the apps -> common)."""
