"""The gray gateway: an asyncio reverse proxy that routes `/{service}/{path}` by the gray
decision, fed by the dashboard's gateway protocol (docs/gateway-protocol.md)."""
