"""Add a person who keeps a codex: an ordinary account, never staff (operators use
``createsuperuser``). On a terminal the password is asked for twice and never echoed;
otherwise a generated one is printed once."""

import getpass
import secrets
import sys

from allauth.account.models import EmailAddress
from django.contrib.auth import get_user_model, password_validation
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    stealth_options = ("stdin",)  # as createsuperuser: tests pass their own stdin
    help = (
        "Add a person with their own codex (not staff, no admin). On a terminal, asks for the "
        "password; otherwise prints a generated one."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("username", help="the name they sign in with")
        parser.add_argument("--email", default="", help="their email address (optional)")

    def handle(self, *args, username: str, email: str, **options) -> None:
        User = get_user_model()
        field = User._meta.get_field(User.USERNAME_FIELD)
        try:
            username = field.clean(username, None)
        except ValidationError as error:
            raise CommandError(f"{username!r} is not a username: {' '.join(error.messages)}") from None
        if User.objects.filter(**{User.USERNAME_FIELD: username}).exists():
            raise CommandError(f"a user named {username!r} already exists")
        stdin = options.get("stdin", sys.stdin)
        if stdin.isatty():
            password = getpass.getpass(f"Password for {username}: ")
            if password != getpass.getpass("Password (again): "):
                raise CommandError("the two passwords did not match; nobody was added")
            generated = False
        else:
            password = secrets.token_urlsafe(15)
            generated = True
        candidate = User(**{User.USERNAME_FIELD: username}, email=email)
        try:
            password_validation.validate_password(password, candidate)
        except ValidationError as error:
            raise CommandError(" ".join(error.messages) + " Nobody was added.") from None
        user = User.objects.create_user(username, email=email, password=password)
        if email:
            # The operator vouches for it: single sign-on may match this account by it, where the
            # provider allows that (authserver.enterprise.sso); an unverified one would lose its password then.
            EmailAddress.objects.create(user=user, email=email, verified=True, primary=True)
        what = f"Added {username}, a person with their own codex (not staff: no admin)"
        if generated:
            self.stdout.write(f"{what}, with the password: {password}")
            self.stdout.write(f"Pass it on; `manage.py changepassword {username}` sets another.")
        else:
            self.stdout.write(f"{what}.")
