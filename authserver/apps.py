from django.apps import AppConfig


class AuthserverConfig(AppConfig):
    name = "authserver"
    verbose_name = "Authorization server"

    def ready(self) -> None:
        from authserver import cors, signals  # noqa: F401  (connect the CORS origin rule and the receivers)
