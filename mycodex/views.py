"""The signed-in person's own codex (contract 9): list and search, one entry with its
history, export, import and delete. Thin: the reads are notebook selectors, the writes
notebook services and notebook.transfer. Every query is scoped to ``request.user``'s codex;
an entry id of another codex is a 404 exactly like an id that does not exist."""

import dataclasses
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.utils import timezone
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_http_methods
from oauth2_provider.models import get_application_model

from common.inputs import ascii_int
from mycodex import history
from mycodex.forms import CLEAR_PHRASE, ORDER_ID, ClearForm, ImportForm, SearchForm
from notebook import selectors, services, transfer
from notebook.exceptions import InvalidArgument, NotFound
from notebook.limits import IMPORT_FORM_OVERHEAD_BYTES, MAX_BIGINT, MAX_SAFE_INTEGER
from notebook.models import Codex, Entry
from notebook.representations import entry_summary_dict
from notebook.validation import SearchParams, parse_search_params

PAGE_SIZE = 20
# Filtered pages in id order gather up to this many tool pages (100 candidates each), so a
# rare match does not leave the person clicking through empty pages.
ID_ORDER_MAX_TOOL_PAGES = 10


def _codex(request: HttpRequest) -> Codex | None:
    """The person's codex if they have one; looking never creates it."""
    return Codex.objects.filter(owner=request.user).select_related("owner").first()


@dataclass
class ListPage:
    entries: list[dict[str, Any]]
    next_cursor: str | None
    scanned: int


def _id_order_page(codex: Codex, params: SearchParams) -> ListPage:
    """The tool's own search, page after page with its signed cursors, until the page is full."""
    entries: list[Entry] = []
    scanned = 0
    cursor = params.cursor
    for _ in range(ID_ORDER_MAX_TOOL_PAGES):
        page = selectors.entry_search(
            codex=codex,
            params=SearchParams(
                params.query, params.tag, params.related_agent_id, PAGE_SIZE - len(entries), cursor, params.written_by
            ),
        )
        entries.extend(page.entries)
        scanned += page.scanned
        cursor = page.next_cursor
        if cursor is None or len(entries) >= PAGE_SIZE:
            break
    return ListPage(_summaries(codex, entries), cursor, scanned)


def _summaries(codex: Codex, entries: list[Entry]) -> list[dict[str, Any]]:
    """The tool's summaries of ``entries`` plus, for the page only, who created and who last
    changed each (one query for the whole page)."""
    writers = selectors.entry_writers(codex=codex, entry_ids=[entry.id for entry in entries])
    summaries = []
    for entry in entries:
        summary = entry_summary_dict(entry)
        # The excerpt is a prefix of the content: it is all of it exactly when their UTF-8
        # lengths agree (contentBytes counts bytes, the excerpt characters).
        summary["cut"] = summary["contentBytes"] > len(summary["excerpt"].encode("utf-8"))
        if entry.id in writers:
            summary["created_by"] = writers[entry.id].created_by.writer
            summary["changed_by"] = writers[entry.id].last_changed_by.writer
        summaries.append(summary)
    return summaries


def _application_client_id(value: str) -> str:
    """The client id an ``?app=`` value names: an application's id on this server or its client id."""
    if (pk := ascii_int(value, max_value=MAX_BIGINT)) is not None:
        client_id = get_application_model().objects.filter(pk=pk).values_list("client_id", flat=True).first()
        if client_id is not None:
            return client_id
    return value


@login_required
@require_GET
def codex_list(request: HttpRequest) -> HttpResponse:
    form = SearchForm(request.GET)
    codex = _codex(request)
    context: dict[str, Any] = {"form": form, "page": None, "error": None, "mcp_url": settings.CODEX_RESOURCE_URL}
    if codex is None or not Entry.objects.filter(codex=codex).exists():
        context["empty_codex"] = True
        return render(request, "mycodex/list.html", context)
    if not form.is_valid():
        context["error"] = " ".join(" ".join(errors) for errors in form.errors.values())
        return render(request, "mycodex/list.html", context, status=400)
    data = form.cleaned_data
    order = data["order"] or "recent"
    written_by = _application_client_id(data["app"]) if data["app"] else None
    if written_by is not None:
        # The name it had when it last wrote here; never another person's view of the application.
        context["written_by"] = selectors.writer_name(codex=codex, client_id=written_by) or data["app"]
    try:
        params = parse_search_params(
            query=data["q"],
            tag=data["tag"] or None,
            related_agent_id=data["agent"] or None,
            limit=PAGE_SIZE,
            cursor=request.GET.get("cursor") or None,
        )
        params = dataclasses.replace(params, written_by=written_by)
        if order == ORDER_ID:
            page = _id_order_page(codex, params)
        else:
            recent = selectors.entry_recent(codex=codex, params=params)
            page = ListPage(_summaries(codex, recent.entries), recent.next_cursor, recent.scanned)
    except InvalidArgument as error:
        context["error"] = error.message
        return render(request, "mycodex/list.html", context, status=400)
    query = request.GET.copy()
    query.pop("cursor", None)
    if params.cursor is not None:
        context["first_url"] = f"{reverse('mycodex:list')}?{query.urlencode()}"
    if page.next_cursor:
        query["cursor"] = page.next_cursor
        context["next_url"] = f"{reverse('mycodex:list')}?{query.urlencode()}"
    # One page holds every match: "on this page" would suggest more pages.
    only_page = params.cursor is None and not page.next_cursor
    # The total is the count the services keep on the codex row (notebook.quotas), not a COUNT.
    whole = only_page and not params.filtered and written_by is None
    context.update(
        page=page, order=order, filtered=params.filtered, total=codex.entry_count, whole=whole, only_page=only_page
    )
    return render(request, "mycodex/list.html", context)


def _own_entry(request: HttpRequest, entry_id: uuid.UUID) -> tuple[Codex, Entry]:
    codex = _codex(request)
    if codex is None:
        raise Http404(selectors.NOT_FOUND_MESSAGE)
    try:
        return codex, selectors.entry_get(codex=codex, entry_id=entry_id)
    except NotFound:
        raise Http404(selectors.NOT_FOUND_MESSAGE) from None


def _int_param(request: HttpRequest, name: str) -> int | None:
    return ascii_int(request.GET.get(name), max_value=MAX_SAFE_INTEGER)


@login_required
@require_GET
def entry_detail(request: HttpRequest, entry_id: uuid.UUID) -> HttpResponse:
    _, entry = _own_entry(request, entry_id)
    items = history.entry_history(entry)
    older, newer = _int_param(request, "from"), _int_param(request, "to")
    comparison = history.compare(entry, older, newer) if older is not None and newer is not None else None
    revisions = [item.revision for item in items]  # newest first
    context = {
        "entry": entry,
        # Revision 1's writer created the entry (an imported entry may lack revision 1: its
        # oldest snapshot stands in); the current revision's writer last changed it.
        "created_by": revisions[-1].writer if revisions else None,
        "changed_by": revisions[0].writer if revisions else None,
        "provenance_json": json.dumps(entry.provenance, indent=2, ensure_ascii=False)
        if entry.provenance is not None
        else None,
        "history": items,
        "revision_numbers": [item.revision.revision for item in items],
        "compare_from": older,
        "compare_to": newer,
        # The form starts on "what the latest revision changed".
        "select_from": older if older is not None else max(entry.revision - 1, 1),
        "select_to": newer if newer is not None else entry.revision,
        "comparison": comparison,
    }
    return render(request, "mycodex/entry.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def entry_delete(request: HttpRequest, entry_id: uuid.UUID) -> HttpResponse:
    """GET asks for confirmation; POST (with its CSRF token) deletes."""
    codex, entry = _own_entry(request, entry_id)
    if request.method == "POST":
        try:
            services.entry_delete(codex=codex, entry_id=entry.id)
        except NotFound:
            raise Http404(selectors.NOT_FOUND_MESSAGE) from None
        revisions = f"{entry.revision} revision{'s' if entry.revision != 1 else ''}"
        messages.success(request, f"Deleted “{entry.title or 'Untitled note'}” and its {revisions}.")
        return redirect("mycodex:list")
    return render(request, "mycodex/delete.html", {"entry": entry})


@login_required
@require_http_methods(["GET", "POST"])
def clear_codex(request: HttpRequest) -> HttpResponse:
    codex = _codex(request)
    count = Entry.objects.filter(codex=codex).count() if codex is not None else 0
    form = ClearForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        deleted = services.codex_clear(codex=codex) if codex is not None else 0
        messages.success(request, f"Deleted all {deleted} note{'s' if deleted != 1 else ''} in your notebook.")
        return redirect("mycodex:list")
    status = 400 if request.method == "POST" else 200
    return render(request, "mycodex/clear.html", {"form": form, "count": count, "phrase": CLEAR_PHRASE}, status=status)


def _download(
    request: HttpRequest, chunks: Iterator[str] | Iterator[bytes], content_type: str, suffix: str
) -> StreamingHttpResponse:
    """An export as a download, streamed (codex_site.middleware.AsyncStreamingMiddleware sends
    it block by block under ASGI), named for whose notebook it is and when."""
    response = StreamingHttpResponse(chunks, content_type=content_type)
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    name = f"{request.user.get_username()}-notebook-{stamp}.{suffix}"
    response["Content-Disposition"] = content_disposition_header(True, name)
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_GET
def export_json(request: HttpRequest) -> StreamingHttpResponse:
    codex = services.codex_for_user(user=request.user)
    return _download(request, transfer.export_json_chunks(codex=codex), "application/json", "json")


@login_required
@require_GET
def export_markdown(request: HttpRequest) -> StreamingHttpResponse:
    codex = services.codex_for_user(user=request.user)
    return _download(request, transfer.export_markdown_chunks(codex=codex), "text/markdown; charset=utf-8", "md")


@login_required
@require_GET
def export_markdown_zip(request: HttpRequest) -> StreamingHttpResponse:
    """One Markdown file per note with YAML front matter, for Obsidian and other Markdown notebooks."""
    codex = services.codex_for_user(user=request.user)
    return _download(request, transfer.export_markdown_zip_chunks(codex=codex), "application/zip", "markdown.zip")


@login_required
@require_http_methods(["GET", "POST"])
def import_codex(request: HttpRequest) -> HttpResponse:
    limit = settings.CODEX_IMPORT_MAX_BYTES
    context: dict[str, Any] = {"limit": filesizeformat(limit), "report": None, "refused_file": None}
    # Refuse an oversized upload from its declared length, before Django reads the body.
    # (codex_site.bodies refuses it even earlier when uvicorn serves; this covers other handlers.)
    declared = ascii_int(request.META.get("CONTENT_LENGTH"), max_value=10**30)
    if request.method == "POST" and declared is not None and declared > limit + IMPORT_FORM_OVERHEAD_BYTES:
        context["form"] = ImportForm()
        context["refused_file"] = f"The upload is larger than the limit of {filesizeformat(limit)}."
        return render(request, "mycodex/import.html", context, status=413)
    form = ImportForm(request.POST or None, request.FILES or None)
    context["form"] = form
    if request.method == "POST" and form.is_valid():
        try:
            document = transfer.load_document(form.cleaned_data["file"].read())
            report = transfer.codex_import(codex=services.codex_for_user(user=request.user), document=document)
        except transfer.ImportRefused as error:
            context["refused_file"] = str(error)
            return render(request, "mycodex/import.html", context, status=400)
        context["report"] = report
        return render(request, "mycodex/import.html", context, status=200 if report.applied else 400)
    status = 400 if request.method == "POST" else 200
    return render(request, "mycodex/import.html", context, status=status)
