"""One-use JWTs: each (issuer, ``jti``) is accepted once while the JWT lives (RFC 7523 §3,
RFC 7519 §4.1.7), across every worker and host.

``spend`` is the one door: it inserts the pair's row (``authserver.models.SpentJti``) and answers
whether this was its first use. Two concurrent uses of the same pair collide on the row's unique
key, so exactly one is first. Nothing is kept for a JWT that was refused for any other reason:
callers spend last, once everything else has passed. A database fault raises (the request is
refused as an outage), never lets the JWT through.
"""

import datetime as dt
import hashlib

from django.db import IntegrityError, OperationalError, transaction
from django.utils import timezone

from authserver.models import SpentJti

CLIENT_ASSERTION = "client-assertion"
# Expired rows deleted by each spend: more than the one row a spend adds, so the table holds
# about the JWTs alive now.
SWEPT_PER_SPEND = 32


def _key(namespace: str, issuer: str, jti: str) -> str:
    text = "\x00".join((namespace, issuer, jti))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def spend(*, namespace: str, issuer: str, jti: str, expires_at: dt.datetime) -> bool:
    """Record that ``issuer``'s JWT ``jti`` is used, until ``expires_at`` (when the JWT itself
    stops being accepted); True the first time, False for every later use before then."""
    key = _key(namespace, issuer, jti)
    now = timezone.now()
    with transaction.atomic():
        # A row whose JWT has expired guards nothing: the same jti may be used again.
        SpentJti.objects.filter(key=key, expires_at__lte=now).delete()
        try:
            with transaction.atomic():
                SpentJti.objects.create(key=key, expires_at=expires_at)
        except IntegrityError:
            if SpentJti.objects.filter(key=key).exists():
                return False  # spent before
            # Refused for another reason (SQLite reports some refusals as constraint failures).
            raise OperationalError("the spent JWT could not be recorded") from None
    expired = SpentJti.objects.filter(expires_at__lte=now).order_by("expires_at").values("pk")[:SWEPT_PER_SPEND]
    SpentJti.objects.filter(pk__in=expired).delete()
    return True
