"""How large a request head may be. The Python gateway refuses a head over these limits as it
arrives (proxy.py); the agent renders the same into Envoy's and nginx's configurations
(dataplane/agent/). docs/gateway.md (Limits) says how each engine counts them."""

# The request line, "GET /path?query HTTP/1.1" without its CRLF. Over it: 414 URI Too Long.
REQUEST_LINE_LIMIT = 8 * 1024
# One header's name and value (not the colon, the spaces around the value or the CRLF).
HEADER_LIMIT = 8 * 1024
# All headers' names and values together, and how many headers there may be.
HEADERS_LIMIT = 64 * 1024
HEADER_COUNT_LIMIT = 100
# Over any of the three: 431 Request Header Fields Too Large.

# What the answer says (the body's "detail"), in every engine alike.
LINE_TOO_LONG = f"The request line is over {REQUEST_LINE_LIMIT >> 10} KiB."
HEADERS_TOO_LARGE = (
    f"Request headers are limited to {HEADER_COUNT_LIMIT}, of {HEADER_LIMIT >> 10} KiB each "
    f"and {HEADERS_LIMIT >> 10} KiB in all."
)
