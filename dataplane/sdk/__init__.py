"""The service SDK: what a service of the fleet links in so gray releases reach through it.

* `flag`: the request's gray route (`X-Gray-Status`, `X-Gray-Lane`, `X-Gray-Versions`) in a
  context variable, and the helpers that carry it across threads and onto outgoing calls
  (`httpx`, `requests`).
* `middleware`: ASGI and WSGI middleware that set the route per request;
  `django_middleware` the same for Django's middleware chain.
* `celery_flag`: the route in Celery task headers, and a gray or lane task on the queue of
  its version's workers.
* `balancer`: a client-side balancer over the registry, by route, with the gateway's engine.
* `lifecycle`: lossless startup (warm-up, then register) and shutdown (disable, drain, exit),
  each step reported to the dashboard.

Plain Python: no Django import (make lint checks it). docs/service-sdk.md explains the design.
"""
