"""Outcomes -> findings and verdicts, and what explains them: suspects, race evidence,
wrong tokens fed silently, and the columnar bounds scan of a capture."""
