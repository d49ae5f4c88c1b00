from django.core.management.base import BaseCommand

from mcp_endpoint import identity
from mcp_endpoint.listing import SERVER_JSON_PATH, render


class Command(BaseCommand):
    help = (
        "Print server.json for the MCP Registry: this server's identity as a remote at CODEX_PUBLIC_URL/mcp, "
        "named CODEX_REGISTRY_NAME. --docs writes docs/server.json, rendered for the documented example instance."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--output", "-o", help="Write to this file instead of standard output.")
        parser.add_argument(
            "--docs", action="store_true", help=f"Write {SERVER_JSON_PATH.name} in docs/ for the example instance."
        )
        parser.add_argument("--check", action="store_true", help="With --docs: exit 1 if the file differs.")

    def handle(self, *args, output: str | None = None, docs: bool = False, check: bool = False, **options) -> None:
        if check and not docs:
            self.stderr.write("--check compares docs/server.json: give --docs too")
            raise SystemExit(2)
        if docs:
            text = render(identity.server_json(identity.DOCUMENTED))
            if check:
                if not SERVER_JSON_PATH.exists() or SERVER_JSON_PATH.read_text() != text:
                    self.stderr.write(f"{SERVER_JSON_PATH} is out of date; run manage.py export_server_json --docs")
                    raise SystemExit(1)
                self.stdout.write(f"{SERVER_JSON_PATH} matches the server's identity")
                return
            SERVER_JSON_PATH.write_text(text)
            self.stdout.write(f"wrote {SERVER_JSON_PATH}")
            return
        text = render(identity.server_json(identity.Instance.configured()))
        if output:
            with open(output, "w") as file:
                file.write(text)
            self.stderr.write(f"wrote {output}")
            return
        self.stdout.write(text, ending="")
