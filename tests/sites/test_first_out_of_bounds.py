"""``forensics.sites.first_out_of_bounds``, the check the probe's guard calls: on every record
of every simulated scenario it is the first out-of-range finding the replay's judge gives
that record under the same model, or None exactly when the judge has none."""

from __future__ import annotations

from forensics.findings import judge_record
from forensics.simulation import SCENARIOS, simulate
from forensics.sites import SITES, first_out_of_bounds, get_site


def test_first_out_of_bounds_is_the_judges_first_finding() -> None:
    records = [r for scenario in sorted(SCENARIOS)
               for r in simulate(scenario, steps=40, batch=8, seed=3) if not r.summary]
    seen = set()
    for record in records:
        for patched in (False, True):
            outcome = get_site(record.site).model(patched)(record)
            found = [f for f in judge_record(record, outcome) if f["kind"] == "out_of_bounds"]
            got = first_out_of_bounds(record, patched)
            if not found:
                assert got is None
                continue
            seen.add(record.site)
            key = min((f["row"] if f["row"] is not None else 2**62,
                       f["element"] if f["element"] is not None else 2**62) for f in found)
            assert got in found
            assert (got["row"] if got["row"] is not None else 2**62,
                    got["element"] if got["element"] is not None else 2**62) == key
    assert seen == set(SITES)  # every site, Model Runner V2's included
