from django.core.management.base import BaseCommand

from mcp_endpoint.listing import TOOLS_JSON_PATH, live_listing, render


class Command(BaseCommand):
    help = "Write the live tools/list of the MCP server to docs/mcp-tools.json."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--check", action="store_true", help="Exit 1 if the file differs instead of writing it.")

    def handle(self, *args, check: bool = False, **options) -> None:
        text = render(live_listing())
        if check:
            if not TOOLS_JSON_PATH.exists() or TOOLS_JSON_PATH.read_text() != text:
                self.stderr.write(f"{TOOLS_JSON_PATH} is out of date; run manage.py export_mcp_tools")
                raise SystemExit(1)
            self.stdout.write(f"{TOOLS_JSON_PATH} matches the live listing")
            return
        TOOLS_JSON_PATH.parent.mkdir(parents=True, exist_ok=True)
        TOOLS_JSON_PATH.write_text(text)
        self.stdout.write(f"wrote {TOOLS_JSON_PATH}")
