"""`python -m dataplane.gateway --dashboard URL --token T --listen HOST:PORT` (--help)."""

import logging

import uvloop

from dataplane.gateway import app, options


def main() -> None:
    parsed = options.parse()
    logging.basicConfig(
        level=parsed.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # httpx logs every request at INFO: one line per poll and per metric report.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    uvloop.run(app.serve(parsed))


if __name__ == "__main__":
    main()
