"""A malformed third-party site (test_plugins): its ``Site`` has no ``checks``, so building it
raises and the registry skips the plugin with a warning naming the attribute."""

from __future__ import annotations

from toy_site import FIELDS, run_batch

from forensics.sites import Site

SITE = Site(name="bad_gather", fields=FIELDS, output_fields=(), summary_bound="size",
            summary_tensor="table", run_batch=run_batch,
            checks=None)  # type: ignore[arg-type]
