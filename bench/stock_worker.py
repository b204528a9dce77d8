"""`celery -A bench.stock_worker worker`: graylane's Celery app in a worker with BENCH_STOCK's
alternatives in place of our pieces (bench/stock.py)."""

from bench.stock import chosen, install

install(chosen())

from graylane.celery import app  # noqa: E402

__all__ = ["app"]
