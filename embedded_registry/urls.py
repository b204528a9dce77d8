from django.urls import path

from registry_sync import nacos_views

urlpatterns = [
    # Nacos serves login at both paths (the Java client uses the second).
    path("v1/auth/login", nacos_views.login, name="nacos-login"),
    path("v1/auth/users/login", nacos_views.login, name="nacos-users-login"),
    path("v1/ns/instance", nacos_views.instance, name="nacos-instance"),
    path("v1/ns/instance/beat", nacos_views.beat, name="nacos-beat"),
    path("v1/ns/instance/list", nacos_views.instance_list, name="nacos-instance-list"),
]
