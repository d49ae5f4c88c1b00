from django.apps import AppConfig


class AuthserverConfig(AppConfig):
    name = "authserver"
    verbose_name = "Authorization server"

    def ready(self) -> None:
        # Connect the CORS origin rule and the receivers, and have DOT's application model ask the
        # redirect-URI rule.
        from authserver import signals  # noqa: F401
        from authserver.clients import redirect_uris
        from authserver.oauth import cors  # noqa: F401

        redirect_uris.connect_dot()
