"""Consent is always asked: no application skips the consent page (``authserver.signals`` keeps
``skip_authorization`` off from now on; this turns off any that an edit turned on before)."""

from django.conf import settings
from django.db import migrations


def consent_always_asked(apps, schema_editor) -> None:  # noqa: ANN001
    app_label, model_name = settings.OAUTH2_PROVIDER_APPLICATION_MODEL.split(".")
    apps.get_model(app_label, model_name).objects.filter(skip_authorization=True).update(skip_authorization=False)


class Migration(migrations.Migration):
    dependencies = [
        ("authserver", "0007_waiting_by_network"),
        migrations.swappable_dependency(settings.OAUTH2_PROVIDER_APPLICATION_MODEL),
    ]

    operations = [migrations.RunPython(consent_always_asked, migrations.RunPython.noop)]
