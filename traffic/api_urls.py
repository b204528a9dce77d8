from django.urls import path

from traffic import api_views

urlpatterns = [
    path("traffic-samples/", api_views.TrafficSamplesView.as_view(), name="traffic-samples"),
]
