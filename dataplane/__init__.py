"""Graylane's data plane: the processes that carry real requests.

Plain Python with no Django import (make lint checks it): the gray gateway (`gateway`),
and the demo fleet of `make run` (`demo`). They decide with the same engine as the
dashboard's simulator (`routing_engine`), so a request is routed alike everywhere.
"""
