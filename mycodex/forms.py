"""The pages' forms. Search fields keep what was typed exactly (no stripping): the tool
compares literally, and the page must find what the tool finds."""

from django import forms
from django.conf import settings
from django.template.defaultfilters import filesizeformat

from notebook.limits import QUERY_MAX_CHARS, RELATED_AGENT_MAX_CHARS, TAG_MAX_CHARS, WRITER_FIELD_MAX_CHARS

ORDER_RECENT = "recent"
ORDER_ID = "id"
CLEAR_PHRASE = "delete all my notes"


class SearchForm(forms.Form):
    q = forms.CharField(label="Search", required=False, max_length=QUERY_MAX_CHARS, strip=False)
    tag = forms.CharField(label="Tag (exact)", required=False, max_length=TAG_MAX_CHARS, strip=False)
    agent = forms.CharField(
        label="Related agent id (exact)", required=False, max_length=RELATED_AGENT_MAX_CHARS, strip=False
    )
    # An application's client id (or its id on this server), as the "written by" links set it.
    app = forms.CharField(label="Written by application", required=False, max_length=WRITER_FIELD_MAX_CHARS)
    order = forms.ChoiceField(
        label="Order",
        required=False,
        choices=[(ORDER_RECENT, "Newest first"), (ORDER_ID, "By id (as the search tool)")],
    )


class ImportForm(forms.Form):
    file = forms.FileField(label="Export file (.json)")

    def clean_file(self):
        upload = self.cleaned_data["file"]
        limit = settings.CODEX_IMPORT_MAX_BYTES
        if upload.size > limit:
            raise forms.ValidationError(
                f"The file is {filesizeformat(upload.size)}; the limit here is {filesizeformat(limit)}. "
                "An operator can import larger files with manage.py codex_import."
            )
        return upload


class ClearForm(forms.Form):
    confirmation = forms.CharField(label=f"Type “{CLEAR_PHRASE}” to confirm", strip=True)

    def clean_confirmation(self) -> str:
        value = self.cleaned_data["confirmation"]
        if value != CLEAR_PHRASE:
            raise forms.ValidationError(f"Type exactly “{CLEAR_PHRASE}” to delete every note.")
        return value
