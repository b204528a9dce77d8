class DeliveryError(Exception):
    """A delivery attempt failed (unreachable, refused, wrong answer); it is retried."""
