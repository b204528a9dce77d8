from django.dispatch import Signal

# Sent after commit whenever the set of routable (UP) instances of some services changed,
# with `services`: the names. Gateways learn about instances going in and out of traffic
# from it without waiting for a policy revision.
routable_instances_changed = Signal()
