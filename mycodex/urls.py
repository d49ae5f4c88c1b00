from django.urls import path

from mycodex import views

app_name = "mycodex"

urlpatterns = [
    path("", views.codex_list, name="list"),
    path("entries/<uuid:entry_id>/", views.entry_detail, name="entry"),
    path("entries/<uuid:entry_id>/delete/", views.entry_delete, name="delete"),
    path("export.json", views.export_json, name="export"),
    path("export.md", views.export_markdown, name="export_markdown"),
    path("export-markdown.zip", views.export_markdown_zip, name="export_markdown_zip"),
    path("import/", views.import_codex, name="import"),
    path("delete-all/", views.clear_codex, name="clear"),
]
