from django.urls import path

from registry_sync import nacos_views

urlpatterns = [
    path("v1/ns/instance", nacos_views.instance, name="nacos-instance"),
    path("v1/ns/instance/beat", nacos_views.beat, name="nacos-beat"),
    path("v1/ns/instance/list", nacos_views.instance_list, name="nacos-instance-list"),
]
