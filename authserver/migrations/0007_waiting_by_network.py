"""Waiting registrations are counted per client network (an IPv4 address, an IPv6 address's /64:
``common.ratelimit.network_of``): the rows of those waiting now are keyed so too."""

import ipaddress

from django.db import migrations


def network_of(address: str) -> str:
    # common.ratelimit.network_of as it stood when this migration was written.
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((int(ip), 64), strict=False))
    return str(ip)


def waiting_by_network(apps, schema_editor) -> None:  # noqa: ANN001
    PendingRegistration = apps.get_model("authserver", "PendingRegistration")
    for pending in PendingRegistration.objects.all().only("pk", "address"):
        network = network_of(pending.address)
        if network != pending.address:
            PendingRegistration.objects.filter(pk=pending.pk).update(address=network)


class Migration(migrations.Migration):
    dependencies = [("authserver", "0006_spent_jti_and_notes_cache")]

    operations = [migrations.RunPython(waiting_by_network, migrations.RunPython.noop)]
