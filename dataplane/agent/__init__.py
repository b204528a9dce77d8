"""The Graylane agent: drives Envoy or nginx from the gateway protocol (docs/agent.md)."""
