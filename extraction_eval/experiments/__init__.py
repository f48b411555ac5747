"""The run path only: plan a run (``config``, ``prepare``, ``budget``, ``partition``), drive it
(``driver``, ``runner``, in ``local_mode`` or ``langfuse_mode``, picked by ``run``), record and
finalize it (``summary``), across machines (``shards``) and across configurations (``matrix``).
What reads stored runs afterwards is ``analysis``."""
