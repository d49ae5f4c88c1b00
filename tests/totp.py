"""RFC 6238 time-based one-time passwords, written from the RFC (HMAC-SHA-1, 30-second steps,
6 digits), so that the tests compute a code from the secret the setup page shows, as an
authenticator app does, rather than ask the server's own code for one."""

import base64
import hashlib
import hmac
import struct


def totp(secret: str, at: float, *, step: int = 30, digits: int = 6) -> str:
    key = base64.b32decode(secret.upper() + "=" * (-len(secret) % 8))
    counter = struct.pack(">Q", int(at // step))
    digest = hmac.new(key, counter, hashlib.sha1).digest()
    offset = digest[-1] & 0x0F
    value = struct.unpack(">I", digest[offset : offset + 4])[0] & 0x7FFFFFFF
    return str(value % 10**digits).zfill(digits)
