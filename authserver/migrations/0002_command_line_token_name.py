"""The application that minted tokens belong to is called what a person reads after
"written by": "a command-line token (mint_token)" (it was "Agent Codex operator tokens").
Revisions keep the name they were written under, as every writer's name is frozen."""

from django.db import migrations

OLD = "Agent Codex operator tokens"
NEW = "a command-line token (mint_token)"


def rename(apps, schema_editor, old: str = OLD, new: str = NEW) -> None:  # noqa: ANN001
    Application = apps.get_model("oauth2_provider", "Application")
    if not Application.objects.filter(name=new).exists():
        Application.objects.filter(name=old).update(name=new)


def rename_back(apps, schema_editor) -> None:  # noqa: ANN001
    rename(apps, schema_editor, old=NEW, new=OLD)


class Migration(migrations.Migration):
    dependencies = [("authserver", "0001_cache_table"), ("oauth2_provider", "0022_refreshtoken_token_family_index")]
    operations = [migrations.RunPython(rename, rename_back)]
