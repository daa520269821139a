"""``evalrun view``: a loopback web UI over the run index and the bundles it points to (the
run list, a run's cases, runs compared case by case, each eval's history; docs/viewer.md).

It only reads; pages are drawn by the script shipped in ``static/``, which sets text and
never markup from a bundle.
"""
