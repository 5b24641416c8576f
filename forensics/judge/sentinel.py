"""Whether an id equal to the embedding's rows is the ``vocab_size`` sentinel: not where the
capture's manifest names a vocabulary of another size (an embedding padded past it), whose
sentinel is that size; such an id is past the end (``past_end``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from forensics.manifest_facts import VOCAB, read_fact
from forensics.sites.core import EMBEDDING_ROWS

if TYPE_CHECKING:
    import pandas as pd

#: the class of an id equal to its bound (:func:`forensics.sites.core.value_class`)
SENTINEL = "vocab_size"
#: the class of an id past its bound
PAST_END = "past_end"


def past_a_known_vocabulary(findings: pd.DataFrame, capture: Any) -> pd.DataFrame:
    """``findings`` with each ``vocab_size`` finding of the embedding's rows whose value is
    not the vocabulary size the capture's manifest names classed ``past_end``."""
    vocab, _, _ = read_fact(getattr(capture, "manifest", None) or {}, VOCAB)
    if vocab is None or not len(findings) or "value_class" not in findings.columns:
        return findings
    wrong = ((findings["value_class"] == SENTINEL) & (findings["indexed"] == EMBEDDING_ROWS)
             & (findings["value"] != vocab)).astype(bool)
    if not wrong.any():
        return findings
    classes = [PAST_END if w else c for w, c in zip(wrong, findings["value_class"], strict=True)]
    return findings.assign(value_class=classes)  # each other cell as it was (None stays None)
