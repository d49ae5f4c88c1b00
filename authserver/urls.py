from django.urls import path

from authserver import clients

app_name = "authserver"

urlpatterns = [
    path("", clients.authorized_clients, name="clients"),
    path("<int:application_id>/revoke/", clients.revoke_client, name="revoke"),
    path("agents/new/", clients.new_agent, name="new_agent"),
]
