"""Package layout that pyproject.toml alone cannot say: data directories as packages.

``schema/`` (Cypher DDL, canned queries, record schemas) and ``migrations/`` (Alembic)
stay at the top of the repository, where people and tools look for them, and ship
inside the wheel as ``er._schema`` and ``er._migrations``, loaded through
importlib.resources. Everything else is in pyproject.toml.
"""

from setuptools import find_packages, setup

DATA_PACKAGES = {
    "er._schema": "schema",
    "er._migrations": "migrations",
    "er._migrations.versions": "migrations/versions",
}

setup(
    packages=find_packages(include=["er", "er.*", "workers", "workers.*"]) + list(DATA_PACKAGES),
    package_dir=DATA_PACKAGES,
    package_data={
        "er": ["py.typed", "_data/*"],
        "er.reports": ["templates/*.j2"],
        "er._schema": ["*/*.cypher", "*/*.json"],
        "er._migrations": ["*.py", "*.mako"],
        "er._migrations.versions": ["*.py"],
    },
)
