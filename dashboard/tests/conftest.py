from traffic.tests.conftest import samples  # noqa: F401  (the preview tests' sample store)
