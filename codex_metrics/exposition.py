"""``/metrics``: who may scrape it, and what a scrape answers.

Not public: a scrape is answered only for a client address in the allowed networks
(loopback by default, ``CODEX_METRICS_ALLOW``) or with ``Authorization: Bearer <token>``
matching ``CODEX_METRICS_TOKEN`` (compared in constant time); anyone else gets the site's
404, as for a page that does not exist.

In prometheus_client's multiprocess mode (``PROMETHEUS_MULTIPROC_DIR`` set, as
``codex_site.serve`` does for ``--workers N``) a scrape adds up the files of every worker
that has run since the directory was cleaned; otherwise it is this process's registry, with
prometheus_client's process and Python collectors.
"""

import hmac
import ipaddress
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST as CONTENT_TYPE_LATEST
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
DEFAULT_ALLOW = ("127.0.0.1", "::1")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(values: Iterable[str]) -> tuple[Network, ...]:
    """Addresses or CIDR networks (``10.0.0.0/8``); raises ValueError naming a bad one."""
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(value, strict=False))
        except ValueError:
            raise ValueError(f"{value!r} is not an IP address or network") from None
    return tuple(networks)


def scrape_allowed(
    *,
    client: ipaddress.IPv4Address | ipaddress.IPv6Address | None,
    presented: str | None,
    networks: Iterable[Network],
    token: str,
) -> bool:
    """Whether this request may read the metrics: its client address (as the caller parsed it,
    ``common.ratelimit.client_ip``: None when there is none) is in ``networks``, or the bearer
    credential it ``presented`` (as the caller read it, ``common.inputs.bearer_credential``) is
    the ``token`` (when one is configured)."""
    if token and presented is not None and hmac.compare_digest(presented.encode(), token.encode()):
        return True
    return client is not None and any(client in network for network in networks)


class UsageCollector(Collector):
    """Codexes, entries and stored bytes from the counters each codex row keeps
    (``Codex.entry_count``, ``stored_bytes``): ``totals()`` is one aggregate over the codex
    table, never a count of entries. Read at each scrape; omitted when ``totals`` returns
    None (the database is unreachable: the rest of the scrape still answers)."""

    def __init__(self, totals: Callable[[], tuple[int, int, int] | None]) -> None:
        self.totals = totals

    def describe(self) -> list:
        return []  # nothing to check at registration; collect() runs only at a scrape

    def collect(self) -> Iterator[GaugeMetricFamily]:
        totals = self.totals()
        if totals is None:
            return
        codexes, entries, stored = totals
        yield GaugeMetricFamily("codex_codexes", "Codexes (one per person who has called a tool)", value=codexes)
        yield GaugeMetricFamily("codex_entries", "Entries in all codexes, from each codex's kept count", value=entries)
        yield GaugeMetricFamily(
            "codex_stored_bytes", "Bytes of entry input stored, every revision counted", value=stored
        )


def multiprocess_dir() -> str | None:
    return os.environ.get(MULTIPROC_ENV) or None


def scrape(extra: Iterable[Collector] = ()) -> tuple[bytes, str]:
    """The text exposition (body, content type): every worker's values in multiprocess
    mode, this process's otherwise, then ``extra`` (read now)."""
    if multiprocess_dir():
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        body = generate_latest(registry)
    else:
        body = generate_latest(REGISTRY)
    collectors = list(extra)
    if collectors:
        now = CollectorRegistry(auto_describe=False)
        for collector in collectors:
            now.register(collector)
        body += generate_latest(now)
    return body, CONTENT_TYPE_LATEST


def clean_multiprocess_dir(path: str | Path) -> int:
    """Make ``path`` and remove the value files earlier processes left in it (how many):
    for the process that starts the workers, before any of them runs. Only prometheus_client's
    ``*.db`` files are removed."""
    directory = Path(path)
    directory.mkdir(parents=True, exist_ok=True)
    removed = 0
    for leftover in directory.glob("*.db"):
        leftover.unlink(missing_ok=True)
        removed += 1
    return removed
