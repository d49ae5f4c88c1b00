"""Deactivating a person revokes everything they granted.

A deactivated person's tokens are refused at once (the token check requires an
active user), but without revocation they would work again the moment the person
is reactivated. So saving a user with ``is_active=False`` (the admin's checkbox,
``user.save()``) revokes their refresh and access tokens and deletes unused
authorization codes; reactivation starts from no tokens. A bulk
``QuerySet.update(is_active=False)`` sends no signal: run ``revoke_tokens`` after it.
"""

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models.signals import post_save
from django.dispatch import receiver
from oauth2_provider.models import get_grant_model

from authserver.tokens import revoke_tokens


@receiver(post_save, sender=get_user_model(), dispatch_uid="authserver.revoke_on_deactivation")
def revoke_on_deactivation(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    if created or instance.is_active:
        return
    revoke_tokens(user=instance)
    get_grant_model().objects.filter(user=instance).delete()
