from django.apps import AppConfig


class AuthserverConfig(AppConfig):
    name = "authserver"
    verbose_name = "Authorization server"

    def ready(self) -> None:
        # Connect the CORS origin rule and the receivers.
        from authserver import signals  # noqa: F401
        from authserver.oauth import cors  # noqa: F401
