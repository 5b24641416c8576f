"""A capture or a test fit to hand on: shrink (ddmin), redact (closed vocabularies), the
evidence both keep, ``expected.json`` and the standalone reproducer."""
