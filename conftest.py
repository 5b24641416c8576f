"""The repository root's conftest: its presence puts the root on ``sys.path`` for every run.

A bare ``pytest --forensics-captures DIR`` with ``DIR`` outside the repository makes pytest take
``DIR`` as the rootdir and skip pyproject.toml (its ``pythonpath``), so the suite's
``from tests.conftest import ...`` would fail to collect; pytest imports this file first (it is
in the invocation directory) and prepends its directory.
"""
