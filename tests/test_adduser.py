"""Adding a person who keeps a codex, not an operator: ``manage.py codex_adduser NAME``, and an
admin user list that tells people from staff."""

import fcntl
import io
import os
import select
import subprocess
import sys
import termios

from allauth.account.models import EmailAddress
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import TestCase, TransactionTestCase

from tests.test_docs_examples import ReaderShell

MANAGE = [sys.executable, "manage.py", "codex_adduser"]


class AddUserCommandTest(TestCase):
    def add(self, *args: str) -> str:
        out = io.StringIO()
        call_command("codex_adduser", *args, stdout=out, stdin=io.StringIO())
        return out.getvalue()

    def test_without_a_terminal_it_prints_a_generated_password_for_an_ordinary_person(self) -> None:
        printed = self.add("ada", "--email", "ada@example.org")
        ada = get_user_model().objects.get(username="ada")
        self.assertEqual((ada.is_staff, ada.is_superuser, ada.is_active), (False, False, True))
        self.assertEqual(ada.email, "ada@example.org")
        password = printed.split("password: ")[1].split()[0]
        self.assertGreaterEqual(len(password), 16)
        self.assertTrue(ada.check_password(password))
        self.assertIn("not staff", printed)
        # The operator's word: the address counts as verified (single sign-on may match by it).
        self.assertTrue(EmailAddress.objects.get(user=ada, email="ada@example.org").verified)

    def test_it_refuses_a_name_that_is_taken_or_not_a_username(self) -> None:
        self.add("ada")
        for name in ["ada", "has space", ""]:
            with self.subTest(name=name), self.assertRaises(CommandError):
                self.add(name)
        self.assertEqual(get_user_model().objects.count(), 1)


class AddUserOnATerminalTest(ReaderShell, TransactionTestCase):
    """On a terminal the command asks for the password twice (getpass: nothing is echoed)."""

    def run_on_a_terminal(self, name: str, typed: list[str]) -> tuple[int, str]:
        primary, secondary = os.openpty()

        def controlling_terminal() -> None:
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        process = subprocess.Popen(
            [*MANAGE, name],
            stdin=secondary,
            stdout=secondary,
            stderr=secondary,
            cwd=settings.BASE_DIR,
            env=self.environment(),
            preexec_fn=controlling_terminal,
        )
        os.close(secondary)
        output = b""
        answers = list(typed)
        while True:
            ready, _, _ = select.select([primary], [], [], 60)
            if not ready:
                process.kill()
                self.fail(f"no output from codex_adduser: {output!r}")
            try:
                chunk = os.read(primary, 4096)
            except OSError:  # the command exited and closed the terminal
                break
            if not chunk:
                break
            output += chunk
            while answers and output.count(b"assword") > len(typed) - len(answers):
                os.write(primary, answers.pop(0).encode() + b"\n")
        os.close(primary)
        return process.wait(timeout=60), output.decode(errors="replace")

    def test_it_asks_twice_and_keeps_the_password_typed(self) -> None:
        status, output = self.run_on_a_terminal("bea", ["correct horse battery", "correct horse battery"])
        self.assertEqual(status, 0, output)
        bea = get_user_model().objects.get(username="bea")
        # The command ran with the default hasher, not the test runner's fast one.
        with self.settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.PBKDF2PasswordHasher"]):
            self.assertTrue(bea.check_password("correct horse battery"), output)
        self.assertFalse(bea.is_staff)
        self.assertNotIn("correct horse battery", output)  # never echoed or printed

    def test_two_different_passwords_add_nobody(self) -> None:
        status, output = self.run_on_a_terminal("cy", ["correct horse battery", "another horse battery"])
        self.assertNotEqual(status, 0, output)
        self.assertIn("did not match", output)
        self.assertFalse(get_user_model().objects.filter(username="cy").exists())


class AdminUserListTest(TestCase):
    def test_the_user_list_tells_people_from_staff(self) -> None:
        User = get_user_model()
        operator = User.objects.create_superuser("operator", password="x")
        User.objects.create_user("helper", password="x", is_staff=True)
        User.objects.create_user("ada", password="x")
        self.client.force_login(operator)
        page = self.client.get("/admin/auth/user/")
        self.assertEqual(page.status_code, 200)
        text = page.content.decode()
        for role in ("Operator (superuser)", "Staff", "Person"):
            self.assertIn(role, text)
        people = self.client.get("/admin/auth/user/?is_staff__exact=0")
        self.assertEqual([user.username for user in people.context["cl"].result_list], ["ada"])
