from django.urls import path

from gateways import views

app_name = "gateways"
urlpatterns = [path("", views.gateway_status, name="status")]
