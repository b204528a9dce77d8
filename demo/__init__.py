"""The demo fleet `make run` starts: user-app and order-app, V1 and V2, as small real ASGI
services registered in the embedded registry, behind the demo gateway."""
