from django.urls import path

from embedded_registry import views

urlpatterns = [
    # Nacos serves login at both paths (the Java client uses the second).
    path("v1/auth/login", views.login, name="nacos-login"),
    path("v1/auth/users/login", views.login, name="nacos-users-login"),
    path("v1/ns/instance", views.instance, name="nacos-instance"),
    path("v1/ns/instance/beat", views.beat, name="nacos-beat"),
    path("v1/ns/instance/list", views.instance_list, name="nacos-instance-list"),
    path("v1/ns/operator/metrics", views.operator_metrics, name="nacos-operator-metrics"),
]
