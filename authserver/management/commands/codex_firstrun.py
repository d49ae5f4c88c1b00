"""First-run convenience for `make run`: a local account (created once) and how to connect."""

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

LOCAL_USERNAME = "codex"
# The client versions the banner (and the README's "Connect a client") names: tried, and run
# by the tests (tests/test_firstrun.py, tests/test_docs_examples.py). The Inspector needs
# Node.js 22, which `npx -p node@22` fetches whatever Node.js runs npx.
INSPECTOR = "npx -y -p node@22 -p @modelcontextprotocol/inspector@2.12.0 -- mcp-inspector"
MCP_REMOTE = "mcp-remote@0.15.1"


class Command(BaseCommand):
    help = "Create the local account once and print how to sign in and connect an MCP client."

    def handle(self, *args, **options) -> None:
        User = get_user_model()
        base = settings.CODEX_PUBLIC_URL
        password_file = settings.VAR_DIR / "local-account.txt"
        if not User.objects.filter(username=LOCAL_USERNAME).exists():
            password = secrets.token_urlsafe(12)
            User.objects.create_superuser(LOCAL_USERNAME, email="", password=password)
            settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
            password_file.write_text(f"username: {LOCAL_USERNAME}\npassword: {password}\n")
            password_file.chmod(0o600)
            account = (
                f"Created the local account {LOCAL_USERNAME!r} with password {password!r} (also in {password_file}).\n"
                "It is this machine's operator (staff and superuser: it also signs in to the admin);\n"
                "add people who only keep a codex with `manage.py codex_adduser NAME`."
            )
        elif password_file.exists():
            account = (
                f"Local account: see {password_file} (change it with `manage.py changepassword {LOCAL_USERNAME}`)."
            )
        else:
            account = f"Local account {LOCAL_USERNAME!r} exists (`manage.py changepassword {LOCAL_USERNAME}` to reset)."

        self.stdout.write(
            f"""
================================ Agent Codex ================================
{account}
Sign in:            {base}/accounts/login/   (admin: {base}/admin/)
MCP endpoint:       {base}/mcp
My codex:           {base}/codex/   (what your agents wrote: search, history, export, import, delete)
Connected apps:     {base}/account/clients/

Connect a client (it discovers OAuth, registers, and sends you here to approve):
  Desktop client:   {{"mcpServers": {{"agent-codex": {{"type": "http", "url": "{base}/mcp"}}}}}}
  Only stdio:       {{"mcpServers": {{"agent-codex": {{"command": "npx",
                      "args": ["-y", "{MCP_REMOTE}", "{base}/mcp"]}}}}}}
  MCP Inspector:    {INSPECTOR}
                    (its web page: transport "Streamable HTTP", URL {base}/mcp, then "Connect")
  Python SDK:       see docs/connection.md ("OAuth with the Python SDK")

A headless agent, or the Inspector's command line, with a token (in a second terminal here):
  TOKEN=$(CODEX_PUBLIC_URL={base} DJANGO_DEBUG=1 .venv/bin/python manage.py mint_token {LOCAL_USERNAME})
  {INSPECTOR} --cli {base}/mcp --transport http --header "Authorization: Bearer $TOKEN" --method tools/list
=============================================================================
"""
        )
