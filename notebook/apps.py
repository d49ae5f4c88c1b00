from django.apps import AppConfig


class NotebookConfig(AppConfig):
    name = "notebook"
    verbose_name = "Notebook"
