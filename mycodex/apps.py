from django.apps import AppConfig


class MycodexConfig(AppConfig):
    name = "mycodex"
    verbose_name = "My codex (the person's own pages)"
