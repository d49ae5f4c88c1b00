"""Single sign-on in headless Chromium against a real OpenID Connect provider on loopback
(oidc-provider, tests/oidc.py): a new person, a returning person, a domain that is not
allowed, an existing account matched only where the operator allows it, an OAuth
authorization that goes through the provider and comes back to its consent page, and a
provider that is down."""

from allauth.account.models import EmailAddress
from allauth.socialaccount.models import SocialAccount
from django.contrib.auth import get_user_model
from django.test import override_settings
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions

from tests.browser import BrowserPages, PageChecks, headless_chromium
from tests.live import LiveServerTestCase
from tests.oauth_helpers import authorization_url, pkce_pair, register_client
from tests.oidc import OIDCProvider, sso_settings
from tests.served import free_port

# What every page of this site shows and no page of the provider's does: the header's site name.
OUR_PAGE = "header.site a.brand"
# What every page on the way shows once it has loaded: the provider's heading, or this site's header.
ANY_PAGE = f"h1, {OUR_PAGE}"
CLIENT_ID = "agent-codex"
CLIENT_SECRET = "agent-codex-test-secret"


class SingleSignOnTest(BrowserPages, PageChecks, LiveServerTestCase):
    screenshot_prefix = "sso"

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.provider = OIDCProvider(
            [
                {
                    "client_id": CLIENT_ID,
                    "client_secret": CLIENT_SECRET,
                    "redirect_uris": [
                        f"{cls.live.base_url}/accounts/oidc/{name}/login/callback/" for name in ("acme", "acme-linked")
                    ],
                    "grant_types": ["authorization_code"],
                    "response_types": ["code"],
                    "token_endpoint_auth_method": "client_secret_post",
                }
            ]
        ).start()
        cls.addClassCleanup(cls.provider.stop)

    def setUp(self) -> None:
        self.web = headless_chromium()
        self.addCleanup(self.web.quit)
        self.configure(self.acme())

    def acme(self, **changes):
        return {
            "id": "acme",
            "name": "Acme",
            "issuer": self.provider.issuer,
            "client_id": CLIENT_ID,
            "secret": CLIENT_SECRET,
            "domains": ["acme.test"],
            **changes,
        }

    def configure(self, *providers) -> None:
        override = override_settings(**sso_settings(*providers))
        override.enable()
        self.addCleanup(override.disable)

    def through_provider(self, login: str, start: str = "/codex/", button: str = "Sign in with Acme") -> None:
        """From ``start`` to the sign-in page, the provider's button, the provider's own sign-in
        (as ``login``) and consent, and back: it returns once a page of this site shows, told
        from the provider's by what it shows (this site's header), never by its URL. Each step
        waits for the page it left to be replaced (BrowserPages.to_next_page): a test once read
        the provider's "Sign-in" heading after a wait on the URL had decided the browser was back."""
        self.web.get(self.live.base_url + start)
        provider = self.wait_for_page_showing(By.XPATH, f"//button[normalize-space()='{button}']")
        self.to_next_page(provider.click, By.CSS_SELECTOR, ANY_PAGE)
        self.through_provider_pages(login)

    def through_provider_pages(self, login: str = "", done: tuple[str, str] = (By.CSS_SELECTOR, OUR_PAGE)) -> None:
        """On the provider's pages (unless it remembers this browser): sign in as ``login`` where
        asked, consent, until a page shows ``done``."""
        for _ in range(4):
            if self.web.find_elements(*done):
                return
            self.assertFalse(self.web.find_elements(By.CSS_SELECTOR, OUR_PAGE), self.web.current_url)
            logins = self.web.find_elements(By.NAME, "login")
            if logins:
                logins[0].send_keys(login)
                self.web.find_element(By.NAME, "password").send_keys("any")
            submit = self.web.find_element(By.CSS_SELECTOR, "form button[type=submit]")
            self.to_next_page(submit.click, By.CSS_SELECTOR, ANY_PAGE)
        raise AssertionError(f"still at the provider: {self.web.current_url}")

    def sign_out(self) -> None:
        self.to_next_page(self.web.find_element(By.CSS_SELECTOR, "header form button").click, By.LINK_TEXT, "Sign in")

    def test_a_new_person_gets_an_account_and_a_returning_one_the_same(self) -> None:
        self.through_provider("ada@acme.test")
        self.assertTrue(self.web.current_url.endswith("/codex/"), self.web.current_url)
        self.assertIn("Your notebook is empty", self.web.find_element(By.TAG_NAME, "main").text)
        ada = get_user_model().objects.get(email="ada@acme.test")
        self.assertFalse(ada.has_usable_password())
        self.assertEqual(SocialAccount.objects.get(user=ada).uid, "ada@acme.test")
        self.shot("new-person")
        self.sign_out()
        self.through_provider("ada@acme.test")
        self.assertTrue(self.web.current_url.endswith("/codex/"), self.web.current_url)
        self.assertEqual(get_user_model().objects.filter(email="ada@acme.test").count(), 1)
        self.web.get(self.live.base_url + "/account/")
        self.assertIn("through Acme", self.web.find_element(By.TAG_NAME, "main").text)
        self.shot("account")

    def test_the_page_that_asks_before_going_to_the_provider_goes_there(self) -> None:
        # A link straight to a provider's sign-in (not the sign-in page's button) asks first; its
        # form's answer redirects to the provider, which its Content-Security-Policy must allow.
        self.web.get(self.live.base_url + "/accounts/oidc/acme/login/?next=/codex/")
        self.assertEqual(self.web.find_element(By.TAG_NAME, "h1").text, "Sign in with Acme?")
        self.to_next_page(
            self.web.find_element(By.XPATH, "//button[normalize-space()='Continue']").click, By.CSS_SELECTOR, ANY_PAGE
        )
        self.assertFalse(self.web.find_elements(By.CSS_SELECTOR, OUR_PAGE), self.web.current_url)
        self.assertTrue(self.web.current_url.startswith(self.provider.issuer), self.web.current_url)
        self.assertEqual(self.web.execute_script("return window.__policyViolations || []"), [])

    def test_a_domain_not_allowed_is_refused_and_makes_no_account(self) -> None:
        self.through_provider("eve@elsewhere.test")
        self.assertIn("refused", self.web.find_element(By.TAG_NAME, "h1").text)
        self.assertIn("@acme.test", self.web.find_element(By.CSS_SELECTOR, "[role=alert]").text)
        self.shot("wrong-domain")
        self.check_open_page("refused")  # signed out (PageChecks.signed_in_as is None)
        self.through_provider("unverified-mallory@acme.test")
        self.assertIn("refused", self.web.find_element(By.TAG_NAME, "h1").text)
        self.assertFalse(get_user_model().objects.exclude(username="").exists())

    def test_an_existing_account_is_matched_only_where_the_operator_allows(self) -> None:
        grace = get_user_model().objects.create_user("grace", email="grace@acme.test", password="grace-password")
        EmailAddress.objects.create(user=grace, email="grace@acme.test", verified=True, primary=True)
        self.through_provider("grace@acme.test")
        self.assertIn("refused", self.web.find_element(By.TAG_NAME, "h1").text)
        self.assertIn("already", self.web.find_element(By.CSS_SELECTOR, "[role=alert]").text)
        self.assertFalse(SocialAccount.objects.exists())
        self.configure(self.acme(id="acme-linked", name="Acme (linked)", match_existing=True))
        self.through_provider("grace@acme.test", button="Sign in with Acme (linked)")
        self.assertTrue(self.web.current_url.endswith("/codex/"), self.web.current_url)
        self.assertEqual(SocialAccount.objects.get().user, grace)
        self.assertEqual(get_user_model().objects.count(), 1)
        grace.refresh_from_db()
        self.assertTrue(grace.check_password("grace-password"))  # a verified address: kept

    def test_an_authorization_goes_through_the_provider_and_back_to_consent(self) -> None:
        client_id = register_client(self.live.base_url).json()["client_id"]
        _, challenge = pkce_pair()
        url = authorization_url(self.live.base_url, client_id, code_challenge=challenge, code_challenge_method="S256")
        self.through_provider("lin@acme.test", start=url.removeprefix(self.live.base_url))
        self.assertIn("/o/authorize/", self.web.current_url)
        self.assertIn("to use your notebook?", self.web.find_element(By.TAG_NAME, "h1").text)
        self.assertIn("Signed in as", self.web.find_element(By.TAG_NAME, "main").text)
        self.shot("consent")

    def test_a_provider_that_is_down_gets_a_page_that_says_so(self) -> None:
        self.configure(self.acme(issuer=f"http://127.0.0.1:{free_port()}"))
        self.web.get(self.live.base_url + "/accounts/login/")
        heading = self.to_next_page(
            self.web.find_element(By.XPATH, "//button[normalize-space()='Sign in with Acme']").click, By.TAG_NAME, "h1"
        )
        self.assertIn("could not be used", heading.text)
        self.shot("provider-down")

    def test_a_single_sign_on_account_is_deleted_after_signing_in_again_with_the_provider(self) -> None:
        self.through_provider("del@acme.test")
        user = get_user_model().objects.get(email="del@acme.test")
        # A session whose sign-in is not recent: the provider is asked again.
        from importlib import import_module

        from django.conf import settings as django_settings

        store = import_module(django_settings.SESSION_ENGINE).SessionStore(self.web.get_cookie("sessionid")["value"])
        store["account_authentication_methods"] = [
            {**record, "at": record["at"] - 3600} for record in store["account_authentication_methods"]
        ]
        store.save()
        self.web.get(self.live.base_url + "/account/delete/")
        self.assertIn("Sign in again", self.web.find_element(By.TAG_NAME, "h1").text)
        self.shot("sign-in-again")
        self.signed_in_as = user.username
        self.check_open_page("sign-in-again")
        self.to_next_page(
            self.web.find_element(By.XPATH, "//button[normalize-space()='Sign in again with Acme']").click,
            By.CSS_SELECTOR,
            ANY_PAGE,
        )
        # Through the provider (which remembers this browser; its consent page may ask again) and back.
        self.through_provider_pages(done=(By.ID, "id_confirmation"))
        self.assertIn("/account/delete/", self.web.current_url)
        self.web.find_element(By.ID, "id_confirmation").send_keys(user.username)
        self.web.find_element(By.CSS_SELECTOR, "main form button.danger").click()
        self.wait().until(expected_conditions.presence_of_element_located((By.LINK_TEXT, "Sign in")))
        self.assertIn("Your account and everything in it are deleted", self.web.find_element(By.TAG_NAME, "main").text)
        self.assertFalse(get_user_model().objects.filter(pk=user.pk).exists())
        self.assertFalse(SocialAccount.objects.exists())
