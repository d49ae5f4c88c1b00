"""CODEX_REQUIRE_MFA and CODEX_REQUIRE_MFA_STAFF: a password account without a second factor
sees only the pages that set one up (the admin and the consent page included); one with a
factor, or an account that signs in through single sign-on only, goes on as before."""

from allauth.mfa.models import Authenticator
from django.contrib.auth import get_user_model
from django.test import TestCase, override_settings

HELD_PAGES = ["/codex/", "/account/", "/account/clients/", "/admin/", "/o/authorize/?client_id=x&response_type=code"]


class SecondFactorRequiredTest(TestCase):
    def setUp(self) -> None:
        User = get_user_model()
        self.alice = User.objects.create_user("alice", password="alice-password")
        self.operator = User.objects.create_superuser("operator", password="operator-password")
        self.sso = User.objects.create_user("sso-person")  # no usable password

    def signed_in(self, user):
        self.client.force_login(user)
        return self.client

    def assert_held(self, user) -> None:
        client = self.signed_in(user)
        for path in HELD_PAGES:
            with self.subTest(user=user.username, path=path):
                answer = client.get(path)
                self.assertEqual(answer.status_code, 302, path)
                self.assertEqual(answer["Location"], "/accounts/2fa/")
        page = client.get("/accounts/2fa/", follow=True)
        self.assertContains(page, "asks every account that signs in with a password for a second factor")
        self.assertEqual(client.get("/accounts/2fa/totp/activate/").status_code, 302)  # to reauthenticate first
        self.assertNotEqual(client.get("/accounts/logout/").status_code, 302)

    def assert_free(self, user) -> None:
        client = self.signed_in(user)
        with self.subTest(user=user.username):
            self.assertEqual(client.get("/codex/").status_code, 200)

    @override_settings(CODEX_REQUIRE_MFA=True, CODEX_REQUIRE_MFA_STAFF=True)
    def test_every_password_account_is_held_until_it_has_a_second_factor(self) -> None:
        self.assert_held(self.alice)
        self.assert_held(self.operator)
        self.assert_free(self.sso)
        Authenticator.objects.create(user=self.alice, type=Authenticator.Type.TOTP, data={"secret": "A" * 32})
        self.assert_free(self.alice)
        # Recovery codes alone are not a second factor.
        Authenticator.objects.create(
            user=self.operator, type=Authenticator.Type.RECOVERY_CODES, data={"seed": "00" * 20, "used_mask": 0}
        )
        self.assert_held(self.operator)

    @override_settings(CODEX_REQUIRE_MFA=False, CODEX_REQUIRE_MFA_STAFF=True)
    def test_staff_can_be_held_to_it_alone(self) -> None:
        self.assert_free(self.alice)
        self.assert_held(self.operator)

    @override_settings(CODEX_REQUIRE_MFA=False, CODEX_REQUIRE_MFA_STAFF=False)
    def test_by_default_nobody_is_held(self) -> None:
        self.assert_free(self.alice)
        self.assertEqual(self.signed_in(self.operator).get("/admin/").status_code, 200)
