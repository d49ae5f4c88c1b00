from django.urls import path

from authserver.people import connected

app_name = "authserver"

urlpatterns = [
    path("", connected.authorized_clients, name="clients"),
    path("<int:application_id>/revoke/", connected.revoke_client, name="revoke"),
    path("agents/new/", connected.new_agent, name="new_agent"),
]
