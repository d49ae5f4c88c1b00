from django.urls import path

from authserver import views

app_name = "authserver"

urlpatterns = [
    path("", views.authorized_clients, name="clients"),
    path("<int:application_id>/revoke/", views.revoke_client, name="revoke"),
]
