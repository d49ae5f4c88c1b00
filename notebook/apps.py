from django.apps import AppConfig
from django.db.models.signals import post_migrate


class NotebookConfig(AppConfig):
    name = "notebook"
    verbose_name = "Notebook"

    def ready(self) -> None:

        post_migrate.connect(_repair_triggers, sender=self)


def _repair_triggers(sender, using, **kwargs) -> None:
    from notebook.sqlite import triggers

    triggers.repair_triggers(using)
