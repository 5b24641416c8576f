"""Many captures at once: find them, replay them in parallel (local processes or Ray), stitch
the ranks of one engine, group the results by signature, and query them as one dataset.

Nothing here is imported by ``import forensics``; pyarrow and Ray are imported where used.
"""
