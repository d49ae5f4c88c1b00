"""E-mail addresses, one rule each at every door.

- The domain of an address (``authserver.core.emails``): what the operator's SSO-only domains
  (``policy``), a provider's allowed domains (single sign-on and the ID-JAG grant) and an
  organization's SCIM domains read from an address is the same, for every text.
- The accounts an address names (``authserver.enterprise.addresses``): single sign-on's "taken",
  the ID-JAG grant's "already exists" and the first sign-in of a provisioned person find the same
  accounts, whatever the address's case and wherever the account keeps it (its e-mail, its
  username, an allauth ``EmailAddress``).
"""

from types import SimpleNamespace

from allauth.account.models import EmailAddress
from allauth.core.exceptions import ImmediateHttpResponse
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.db import transaction
from django.test import RequestFactory, SimpleTestCase, TestCase, override_settings
from django.utils import timezone
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from scim2_models import InvalidValueException

from authserver.core import policy
from authserver.enterprise import id_jag, sso
from authserver.enterprise.scim import links
from authserver.enterprise.scim.models import Organization, ProvisionedPerson
from authserver.enterprise.scim.values import checked_email

DOMAINS = ["acme.test"]
ADDRESSES = st.one_of(
    st.text(max_size=30),
    st.builds(
        "{}{}{}".format,
        st.sampled_from(["", "ada", "a@b", " ", "Ada.Lovelace"]),
        st.sampled_from(["@", "", "@@"]),
        st.sampled_from(["", "acme.test", "ACME.test", "acme.test ", "evil.test", "@acme.test"]),
    ),
)


def sso_only(address: str) -> bool:
    """Whether the operator's policy sends a person with this address to single sign-on."""
    user = get_user_model()(username="someone", email=address)
    with override_settings(CODEX_SSO_ONLY_DOMAINS=DOMAINS):
        return policy.sso_only_domain(user) is not None


def scim_accepts(address: str) -> bool:
    try:
        checked_email(address, DOMAINS)
    except InvalidValueException:
        return False
    return True


class DomainRuleTest(SimpleTestCase):
    def test_an_address_without_a_local_part_is_of_no_domain_at_any_door(self) -> None:
        for address in ("@acme.test", "acme.test", "ada@", "", "@"):
            with self.subTest(address=address):
                self.assertFalse(sso.domain_allowed(address, DOMAINS))
                self.assertFalse(sso_only(address))
                self.assertFalse(scim_accepts(address))
        for address in ("ada@acme.test", "Ada@ACME.test", "a@b@acme.test"):
            with self.subTest(address=address):
                self.assertTrue(sso.domain_allowed(address, DOMAINS))
                self.assertTrue(sso_only(address))
                self.assertTrue(scim_accepts(address))

    @given(address=ADDRESSES)
    @hypothesis_settings(max_examples=300, deadline=None)
    def test_every_door_reads_the_same_domain_from_any_text(self, address: str) -> None:
        answers = {
            "single sign-on and ID-JAG": sso.domain_allowed(address, DOMAINS),
            "SSO-only policy": sso_only(address),
            "SCIM": scim_accepts(address) if len(address) <= 254 else sso.domain_allowed(address, DOMAINS),
        }
        self.assertEqual(len(set(answers.values())), 1, (address, answers))


def stored(how: str, address: str):
    """A person whose account keeps ``address`` one way: as its e-mail, its username, or only in
    an allauth EmailAddress (as the ID-JAG grant makes one, once its e-mail changed)."""
    users = get_user_model().objects
    if how == "email":
        return users.create_user("bea", email=address)
    if how == "username":
        return users.create_user(address, email="")
    person = users.create_user("bea", email="")
    EmailAddress.objects.create(user=person, email=address, verified=True, primary=True)
    return person


def provision(person) -> None:
    """``person``, as the organization that signs in through the provider "acme" provisioned them."""
    organization = Organization.objects.create(name="Acme", provider_id="acme", domains=DOMAINS)
    now = timezone.now()
    ProvisionedPerson.objects.create(
        user=person, organization=organization, user_name_key=person.username.lower(), created_at=now, modified_at=now
    )


class AccountsByAddressTest(TestCase):
    PROVIDER = {"id": "acme", "name": "Acme staff", "signup": True, "domains": DOMAINS}

    def single_sign_on_refuses_as_taken(self, address: str) -> bool:
        """A first single sign-on (a new subject) with this verified address: refused because an
        account with it exists (409), or let through to make one."""
        app = SimpleNamespace(provider_id="acme", settings={"codex_domains": DOMAINS})
        sociallogin = SimpleNamespace(
            provider=SimpleNamespace(app=app, name="Acme staff"),
            email_addresses=[SimpleNamespace(email=address, verified=True)],
            is_existing=False,
            user=SimpleNamespace(email=""),
        )
        request = RequestFactory().get("/accounts/oidc/acme/login/callback/")
        request.user = AnonymousUser()
        try:
            sso.CodexSocialAccountAdapter().pre_social_login(request, sociallogin)
        except ImmediateHttpResponse as refused:
            self.assertEqual(refused.response.status_code, 409)
            return True
        return False

    def id_jag_refuses_as_existing(self, address: str) -> bool:
        try:
            id_jag.find_person(self.PROVIDER, {"sub": "a-new-subject", "email": address})
        except id_jag.Refused as refused:
            self.assertIn("already exists here", str(refused))
            return True
        return False

    def test_every_door_finds_the_account_an_address_names_whatever_its_case_and_wherever_it_is_kept(self) -> None:
        for how in ("email", "username", "EmailAddress"):
            for kept, given_address in (("Bea@Acme.test", "bea@acme.test"), ("bea@acme.test", "BEA@acme.TEST")):
                with self.subTest(how=how, kept=kept, given=given_address), transaction.atomic():
                    person = stored(how, kept)
                    self.assertTrue(self.single_sign_on_refuses_as_taken(given_address))
                    self.assertTrue(self.id_jag_refuses_as_existing(given_address))
                    provision(person)
                    self.assertEqual(links.provisioned_account(provider_id="acme", emails=[given_address]), person)
                    transaction.set_rollback(True)

    def test_an_address_no_account_holds_is_free_at_every_door(self) -> None:
        stored("email", "cleo@acme.test")
        self.assertFalse(self.single_sign_on_refuses_as_taken("bea@acme.test"))
        self.assertFalse(self.id_jag_refuses_as_existing("bea@acme.test"))
        self.assertIsNone(links.provisioned_account(provider_id="acme", emails=["bea@acme.test"]))
