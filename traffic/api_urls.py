from django.urls import path

from traffic import api_views, replay_api

urlpatterns = [
    path("traffic-samples/", api_views.TrafficSamplesView.as_view(), name="traffic-samples"),
    path("traffic-samples/replay/", replay_api.ReplayView.as_view(), name="traffic-replay"),
]
