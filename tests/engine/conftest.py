"""Fixtures of the live-engine tests: the engine environment, the tiny model, and the engine
runs (started once per session, two at a time, shared by the tests that read them)."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_runs import ENGINE_PYTHON, Run, Runs, Scenario, build_model  # noqa: E402

#: the harness switch that runs Model Runner V2 (see harness/forensics_harness.py)
V2 = {"FORENSICS_HARNESS_V2": "1"}
#: the engine runs; each is started once and read by several tests
SCENARIOS = [
    Scenario("off", probe=False),
    Scenario("record", legacy_names=True),  # the older names must still work, unwarned
    Scenario("faults_record", env={
        "FORENSICS_HARNESS_FAULTS": "placeholder@4:1,sentinel@8:0,oob@14:2"}),
    Scenario("faults_guard", env={"FORENSICS_MODE": "guard",
                                  "FORENSICS_HARNESS_FAULTS": "sentinel@8:0,oob@14:2"}),
    Scenario("killed", max_tokens=200, kill_after_records=48,
             env={"FORENSICS_FLUSH_EVERY": "8", "FORENSICS_HARNESS_STEP_DELAY": "0.1"}),
    Scenario("nospec_record", spec=0, env={"FORENSICS_HARNESS_FAULTS": "placeholder@4:1"}),
    Scenario("nospec_guard", spec=0, env={"FORENSICS_MODE": "guard",
                                          "FORENSICS_HARNESS_FAULTS": "placeholder@4:1"}),
    Scenario("bad_setting", env={"FORENSICS_MODE": "loud"}),
    Scenario("unknown_runner", env={"FORENSICS_HARNESS_UNKNOWN_RUNNER": "1"}),
    # Model Runner V2 (its Triton kernels in Triton's interpreter: slow, so few tokens)
    Scenario("v2_record", max_tokens=8, env=V2),
    Scenario("v2_draft_record", max_tokens=8, env={**V2, "FORENSICS_HARNESS_FAULTS": "draft@2:1"}),
    Scenario("v2_draft_guard", max_tokens=8, env={**V2, "FORENSICS_MODE": "guard",
                                                  "FORENSICS_HARNESS_FAULTS": "draft@2:1"}),
    Scenario("v2_last_record", max_tokens=8, env={**V2, "FORENSICS_HARNESS_FAULTS": "last@2:2"}),
    Scenario("v2_swap_record", max_tokens=8, env={**V2, "FORENSICS_HARNESS_FAULTS": "swap@2:0"}),
    Scenario("v2_kernels_record", max_tokens=8, env={**V2, "FORENSICS_KERNELS": "all",
                                                     "FORENSICS_KERNELS_KEEP": "all"}),
    # the recorder on, one request's device num_computed_tokens pushed past max_model_len;
    # one idx_mapping entry one past the last request slot (issue 41; one run each: after the
    # first fault a run may not reach a later step)
    Scenario("v2_kernels_computed", max_tokens=8, env={
        **V2, "FORENSICS_KERNELS": "all", "FORENSICS_KERNELS_KEEP": "all",
        "FORENSICS_HARNESS_FAULTS": "computed@3:0"}),
    Scenario("v2_kernels_slot", max_tokens=8, env={
        **V2, "FORENSICS_KERNELS": "all", "FORENSICS_KERNELS_KEEP": "all",
        "FORENSICS_HARNESS_FAULTS": "slot@3:1"}),
    # the recorder on, the worker killed by SIGSEGV mid-run (per-record hand-off, the default);
    # each step slowed down so that generation outlasts the kill (without it, a run on a quiet
    # machine ended before the kill came)
    Scenario("v2_kernels_segv", max_tokens=128, kill_after_records=12,
             kill_signal=signal.SIGSEGV, kill_delay=2.0,
             env={**V2, "FORENSICS_KERNELS": "all", "FORENSICS_KERNELS_KEEP": "all",
                  "FORENSICS_HANDOFF": "record", "FORENSICS_HARNESS_LOG_STEPS": "1",
                  "FORENSICS_HARNESS_STEP_DELAY": "0.5"}),
]


@pytest.fixture(scope="session")
def engine_runs(request: pytest.FixtureRequest,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    """The engines of the scenarios that the collected tests ask for (by fixture name), all
    started at the first request, two at a time (fails without .venv-engine)."""
    if not ENGINE_PYTHON.exists():
        pytest.fail(f"{ENGINE_PYTHON} is missing: build the engine environment with "
                    f"`make engine` (make test-engine does it)")
    import forensics.store.reader  # noqa: F401  (imported once here, not in the polling thread)

    wanted = {name for item in request.session.items
              for name in getattr(item, "fixturenames", ())}
    scenarios = [s for s in SCENARIOS if s.name in wanted]
    runs = Runs(scenarios, build_model(), tmp_path_factory.mktemp("engines"))
    yield runs
    runs.close()


def _scenario_fixture(name: str) -> object:
    def run(engine_runs: Runs) -> Run:
        return engine_runs.get(name)

    run.__doc__ = f"The Run of scenario {name!r} (see SCENARIOS)."
    run.__name__ = name
    return pytest.fixture(scope="session", name=name)(run)


for _scenario in SCENARIOS:
    globals()[f"_fixture_{_scenario.name}"] = _scenario_fixture(_scenario.name)


#: the engine tests wait for their engine, which may queue behind the others (two at a time):
#: their limit (pytest-timeout) is the whole stage's, not the unit tests' 900 s
ENGINE_TEST_TIMEOUT = 3600


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give each live-engine test :data:`ENGINE_TEST_TIMEOUT`."""
    for item in items:
        if "tests/engine/" in item.nodeid and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(ENGINE_TEST_TIMEOUT))
