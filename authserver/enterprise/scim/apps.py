from django.apps import AppConfig


class ScimConfig(AppConfig):
    """SCIM 2.0 provisioning (``authserver.enterprise.scim``): its own app label and migrations, so that
    its tables are apart from the authorization server's."""

    name = "authserver.enterprise.scim"
    label = "scim"
    verbose_name = "SCIM provisioning"
