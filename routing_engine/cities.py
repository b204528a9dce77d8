"""How a policy's city entry is compiled into the keys a request's city is looked up by."""

# The reference design's "本地": callers on this machine or the private network.
LOCAL_CITY = "local"

# Other names of a city the engines resolve callers to: an entry `本地` (the reference
# design's own) matches the callers resolved to `local` too. Resolved here, when a document
# is compiled, so every engine (the gateway, the SDK, Envoy and nginx under the agent)
# reads it from the compiled data alike.
CITY_ALIASES = {"本地": LOCAL_CITY}


def city_keys(entry: str) -> tuple[str, ...]:
    """The keys a city entry matches: itself stripped and casefolded (as a request's city
    is compared), and the city it is another name of."""
    key = entry.strip().casefold()
    alias = CITY_ALIASES.get(key)
    return (key,) if alias is None else (key, alias)
