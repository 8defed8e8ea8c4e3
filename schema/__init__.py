"""Cypher DDL per engine, canned queries, record schemas (shipped as er._schema)."""
