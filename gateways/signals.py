from django.dispatch import Signal

# Sent after a new generation committed, in the process that made it, with `snapshot` (a
# gateways.snapshot.Snapshot). Receivers (gateways/apps.py) queue deliveries, wake long
# polls and refresh the status page, in that order.
generation_made = Signal()
