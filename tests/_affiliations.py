"""Affiliation strings of a few institutes, each written several ways: free text that
shares its words across entities (a field, a city, a country)."""

from __future__ import annotations

import numpy as np

INSTITUTES = [
    ("computer science", "leipzig", "germany", "04109"),
    ("computer science", "dresden", "germany", "01062"),
    ("mathematics", "leipzig", "germany", "04109"),
    ("physics", "mainz", "germany", "55122"),
    ("computer science", "mainz", "germany", "55122"),
    ("chemistry", "oxford", "uk", "ox13qz"),
    ("computer science", "oxford", "uk", "ox13qz"),
    ("biology", "toronto", "canada", "m5s1a1"),
    ("computer science", "toronto", "canada", "m5s1a1"),
    ("statistics", "auckland", "new zealand", "1010"),
]


def affiliations(copies: int, seed: int) -> tuple[list[str], list[int]]:
    """Each institute written ``copies`` ways: abbreviated, reordered, a word dropped,
    a typo; institutes share their field, city and country with others."""
    rng = np.random.default_rng(seed)
    texts, gold = [], []
    for g, (field, city, country, code) in enumerate(INSTITUTES):
        for _ in range(copies):
            dept = rng.choice(["dept of", "department of", "institute of", "inst"])
            univ = rng.choice([f"university of {city}", f"univ {city}", f"{city}", f"u {city}"])
            parts = [f"{dept} {field}", univ, f"{code} {city}", country]
            if rng.random() < 0.3:
                parts.pop(int(rng.integers(2, 4)))
            text = " ".join(parts)
            if rng.random() < 0.3:
                at = int(rng.integers(1, len(text) - 1))
                text = text[:at] + text[at + 1 :]
            texts.append(text)
            gold.append(g)
    return texts, gold
