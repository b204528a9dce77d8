"""How the answers to Graylane's own HTTP calls are quoted in the errors operators read (a
registry's, a push gateway's)."""

EXCERPT_CHARS = 200


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """A one-line, length-limited excerpt of a response body for error messages."""
    flat = " ".join(text.split())
    if not flat:
        return "(empty body)"
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
