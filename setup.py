"""The package list, found rather than written out (the rest is in pyproject.toml).

The repo root is the `paradit` package, so every folder under it that holds an
`__init__.py` (`backend`, `backend.memory`, `nodes`, `web`, ...) is a subpackage
`paradit.<folder>`; `tests` and `docs` hold no `__init__.py` and stay out of the wheel.
"""

from setuptools import find_packages, setup

SUBPACKAGES = find_packages(".", exclude=["tests", "tests.*", "docs", "docs.*", "build", "build.*"])

# script_name: this file sits in the package's folder; naming it keeps it out of the wheel
# (a build backend runs it under another name, and build_py skips only the setup script).
setup(script_name="setup.py", packages=["paradit", *(f"paradit.{name}" for name in SUBPACKAGES)])
