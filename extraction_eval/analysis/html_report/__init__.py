"""The HTML report's data, read from the store in one streaming pass (``reports/`` renders it).

``data`` (:func:`~.data.build_report_data`: the runs, the item table, the details chunks, the
comparison; decides when half is built by ``workers/report_worker``), ``build`` (one range of
items: table columns, compressed chunks, latencies), ``items`` (one item's objects, where their
evidence is, how each fared), ``pairing`` (the two-run parts: the comparison as rows, the diff's
counts, an item's A → B lists).
"""
