"""Support for the tests and the benchmarks (bench/), not tests itself: processes started on
free ports (processes.py), the contract fakes of the systems that cannot run here (fakes/:
Nacos, Eureka, a push gateway), and the labs that put them together (a dashboard, gateways,
agents, the demo fleet). Fixtures stay in the conftest.py files."""
