from django.urls import path
from rest_framework.routers import SimpleRouter

from gateways import api
from gateways.gateway_api import gateway_ack, gateway_config

router = SimpleRouter()
router.register("gateways", api.GatewayViewSet, basename="gateway")

urlpatterns = [
    path("gateway-config/", gateway_config, name="gateway-config"),
    path("gateways/<slug:name>/ack/", gateway_ack, name="gateway-ack"),
    *router.urls,
]
