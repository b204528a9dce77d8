from django.urls import path
from rest_framework.routers import SimpleRouter

from gateways import api_views
from gateways.protocol.views import GatewayAckView, GatewayConfigView

router = SimpleRouter()
router.register("gateways", api_views.GatewayViewSet, basename="gateway")

urlpatterns = [
    path("gateway-config/", GatewayConfigView.as_view(), name="gateway-config"),
    path("gateways/<slug:name>/ack/", GatewayAckView.as_view(), name="gateway-ack"),
    *router.urls,
]
