"""Which of MBSCC's options go together: one line per combination it cannot run."""

from __future__ import annotations

from typing import Any

from er.exceptions import ConfigError


def check_options(m: Any, scored: bool) -> None:
    """Raise ConfigError for options of MBSCC ``m`` that cannot go together;
    ``scored``: whether the batch brings ``pair_scores``."""
    if m.complete_max and m.marking != "components":
        raise ConfigError(f'MBSCC complete_max needs marking="components". Got {m.marking!r}.')
    if m.exact_levels and (m.marking != "components" or m.linkage not in ("average", "single")):
        raise ConfigError(
            'MBSCC exact_levels needs marking="components" and average or single '
            f"linkage. Got marking={m.marking!r}, linkage={m.linkage!r}."
        )
    if m.complete_at and not (m.complete_max and m.exact_levels):
        raise ConfigError(
            "MBSCC complete_at needs complete_max and exact_levels (its clusters are "
            f"read by their scores). Got complete_max={m.complete_max}, "
            f"exact_levels={m.exact_levels}."
        )
    if m.complete_against and (m.complete_at or not m.complete_max):
        raise ConfigError(
            "MBSCC complete_against needs complete_max and no complete_at (a pair "
            f"held against is no probe). Got complete_max={m.complete_max}, "
            f"complete_at={m.complete_at}."
        )
    if m.graft_past and not m.complete_at:
        raise ConfigError(
            "MBSCC graft_past grafts clusters at complete_at: set complete_at too. "
            f"Got graft_past={m.graft_past}."
        )
    if m.complete_max and not scored:
        raise ConfigError(
            f"MBSCC complete_max={m.complete_max} scores every pair of a floor "
            "component: pass pair_scores= with every batch."
        )
