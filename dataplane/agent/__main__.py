"""`python -m dataplane.agent --engine envoy|nginx --dashboard URL --token T` (--help)."""

import asyncio
import logging

from dataplane.agent import app, options


def main() -> None:
    parsed = options.parse()
    logging.basicConfig(
        level=parsed.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)
    asyncio.run(app.serve(parsed))


if __name__ == "__main__":
    main()
