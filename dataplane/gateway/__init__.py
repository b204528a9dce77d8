"""The gray gateway: an asyncio reverse proxy that routes `/{service}/{path}` by the gray
decision, fed by the dashboard's gateway protocol (docs/gateway-protocol.md)."""

from dataplane.gateway import compiled

# Why the request's path runs as Python in this process, or None: compiled (compiled.py).
NOT_COMPILED = compiled.activate(__path__)
