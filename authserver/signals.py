"""Deactivating a person revokes everything they granted.

A deactivated person's tokens are refused at once, and nothing is issued to them or their
headless agents (``authserver.core.tokens.person_may_hold_tokens``, asked at every use and every
issuance), but without revocation their tokens and agents would work again the moment the person is
reactivated. So saving a user with ``is_active=False`` (the admin's checkbox, ``user.save()``)
revokes their headless agents (``authserver.clients.agents.agents_revoke``) and ends their access
as every revocation does (``authserver.core.revocation.access_revoke``: tokens, unused
authorization codes, ID tokens, organizations' grants and sessions); reactivation starts from none.
A bulk ``QuerySet.update(is_active=False)`` sends no signal: what the person held is refused while
they are inactive, and works again if they are reactivated; run ``revoke_tokens`` after one (and
revoke their agents in the admin).

Every token the token endpoint issues (any grant: DOT's ``app_authorized``) writes the audit
line ``token.granted`` (``common.audit``).

An application that cannot hold a secret (a public client: a dynamic registration with
``token_endpoint_auth_method`` "none", or an application made from a metadata document, ``none``
or ``private_key_jwt``) is saved with none. DOT would make one and hash it with the password
hasher, a slow hash by design, for every such client a stranger registers; the validator never
accepts an empty secret (``CodexOAuth2Validator._check_secret``). And no application skips the
consent page: ``skip_authorization`` is never saved on (consent is always asked, whatever an
edit in the admin says; a bulk ``QuerySet.update`` sends no signal, and must not set it).

Signing out leaves a message for the page the person lands on (``LOGOUT_REDIRECT_URL``).
Signing in marks the browser as a known device of the account (``authserver.people.devices``).
"""

from typing import Any

from allauth.account.signals import user_logged_in
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_save, pre_save
from django.dispatch import receiver
from oauth2_provider.models import get_application_model
from oauth2_provider.signals import app_authorized

from authserver.clients import agents
from authserver.core.revocation import access_revoke
from authserver.enterprise.id_jag import GRANT_TYPE as ID_JAG_GRANT_TYPE
from authserver.models import OrganizationGrant
from authserver.people import devices
from common.audit import audit


@receiver(pre_save, sender=get_application_model(), dispatch_uid="authserver.applications_as_configured")
def applications_as_configured(sender: Any, instance: Any, **kwargs: Any) -> None:
    if instance.client_type == sender.CLIENT_PUBLIC:
        instance.client_secret = ""
        instance.hash_client_secret = False
    instance.skip_authorization = False


@receiver(post_save, sender=get_user_model(), dispatch_uid="authserver.revoke_on_deactivation")
def revoke_on_deactivation(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    if created or instance.is_active:
        return
    with transaction.atomic():
        agents.agents_revoke(owner=instance, by="deactivation")
        access_revoke(user=instance, by="deactivation")


@receiver(app_authorized, dispatch_uid="authserver.audit_token_granted")
def audit_token_granted(sender: Any, request: Any, token: Any, **kwargs: Any) -> None:
    # Sent by DOT's token view once a grant has issued this access token (the request is the
    # token request: its grant type is one the validator served). An ID-JAG's token also names
    # the grant and the organization's IdP that decided it (authserver.enterprise.id_jag).
    grant_type = request.POST.get("grant_type")
    by_organization = {}
    if grant_type == ID_JAG_GRANT_TYPE:
        issuer = (
            OrganizationGrant.objects.filter(application_id=token.application_id, user_id=token.user_id)
            .values_list("issuer", flat=True)
            .first()
        )
        by_organization = {"grant": "id_jag", "issuer": issuer}
    audit(
        "token.granted",
        user_id=token.user_id,
        client_id=token.application.client_id if token.application_id is not None else None,
        grant_type=grant_type,
        **by_organization,
        scopes=token.scope.split(),
        access_token_id=token.pk,
        expires=token.expires.isoformat(),
    )


@receiver(user_logged_out, dispatch_uid="authserver.say_signed_out")
def say_signed_out(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    # The session is flushed after this signal; the message store outlives it (a cookie first).
    # A sign-out without the messages middleware (the test client's logout) just has none.
    if request is not None:
        messages.info(
            request,
            "You are signed out. Applications you connected keep their access until you revoke it "
            "under Connected applications.",
            fail_silently=True,
        )


@receiver(user_logged_in, dispatch_uid="authserver.remember_device")
def remember_device(sender: Any, request: Any, response: Any, user: Any, **kwargs: Any) -> None:
    # allauth's signal carries the response the person is sent on with (the sign-in's redirect).
    if response is not None:
        devices.remember(response, user)
