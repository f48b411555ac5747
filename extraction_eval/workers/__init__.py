"""Processes the package starts to share out work, each in a module that says what it runs
(``report_worker``: half of a large HTML report). ``analysis`` asks for one and joins what it
sends back; it starts none itself (``tests/unit/test_shelves.py``)."""
