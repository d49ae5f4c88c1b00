from django.apps import AppConfig


class AuthserverConfig(AppConfig):
    name = "authserver"
    verbose_name = "Authorization server"
