import io

from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import TestCase, override_settings
from oauth2_provider.models import get_access_token_model

from mcp_endpoint.auth import TokenRejected, check_bearer_token


class OperatorCommandsTest(TestCase):
    def setUp(self) -> None:
        self.alice = get_user_model().objects.create_user("alice")

    def mint(self, *args: str) -> str:
        out = io.StringIO()
        call_command("mint_token", *args, stdout=out, stderr=io.StringIO())
        return out.getvalue().strip()

    @override_settings(CODEX_RESOURCE_URL="https://codex.example/mcp")
    def test_mint_token_binds_the_resource_scopes_and_lifetime(self) -> None:
        token = self.mint("alice", "--scopes", "notes:read", "--lifetime", "120")
        grant = check_bearer_token(token)
        self.assertEqual(grant.user, self.alice)
        self.assertEqual(grant.scopes, {"notes:read"})
        stored = get_access_token_model().objects.get(token_checksum=grant.token_checksum)
        self.assertEqual(stored.resource, ["https://codex.example/mcp"])
        self.assertAlmostEqual((stored.expires - stored.created).total_seconds(), 120, delta=5)
        self.assertEqual(stored.token, "")  # hashed at rest

    @override_settings(CODEX_RESOURCE_URL="http://127.0.0.1:8765/mcp")
    def test_mint_token_says_which_server_accepts_the_token_on_stderr_and_prints_only_it(self) -> None:
        out, err = io.StringIO(), io.StringIO()
        call_command("mint_token", "alice", stdout=out, stderr=err)
        self.assertRegex(out.getvalue(), r"^[A-Za-z0-9_-]{40,}\n$")
        self.assertIn("accepted only by http://127.0.0.1:8765/mcp (CODEX_PUBLIC_URL)", err.getvalue())
        # The token may have gone into a variable: the notice does not say it is shown.
        self.assertNotIn("shown", err.getvalue())

    def test_mint_token_refuses_unknown_scopes_users_and_lifetimes(self) -> None:
        for args in [("alice", "--scopes", "admin"), ("nobody",), ("alice", "--lifetime", "0")]:
            with self.subTest(args=args), self.assertRaises(CommandError):
                self.mint(*args)

    def test_revoke_tokens_revokes_every_token_of_the_user(self) -> None:
        tokens = [self.mint("alice"), self.mint("alice")]
        call_command("revoke_tokens", "alice", stdout=io.StringIO())
        for token in tokens:
            with self.assertRaises(TokenRejected):
                check_bearer_token(token)
