from django.apps import AppConfig


class AuthserverConfig(AppConfig):
    name = "authserver"
    verbose_name = "Authorization server"

    def ready(self) -> None:
        from authserver import signals  # noqa: F401  (connects the receivers)
