"""The demo `make run` starts, in one place: the fleet (user-app and order-app, V1, V2 and V3, as
small real ASGI services registered in the embedded registry, behind the demo gateway, with
traffic) under one supervisor that also starts the dashboard, all plain Python (fleet.py,
service.py, supervisor.py, traffic.py: no Django); and the Django app beside it: the
`demo_setup` command (the demo's gateway, policy and lanes) and the dashboard's "Restart
instance" (restart.py)."""
