#!/usr/bin/env python
"""Django's command-line utility for Agent Codex."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "codex_site.settings")
    from django.core.management import execute_from_command_line

    from codex_site.checks import RefusedToStart

    try:
        execute_from_command_line(sys.argv)
    except RefusedToStart as refusal:
        # A plain message and exit status 1, not a traceback: this is an operator's mistake.
        sys.exit(f"Agent Codex refuses to start: {refusal}")


if __name__ == "__main__":
    main()
