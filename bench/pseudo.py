"""Person records from three simulated sources, linked by their true ids (issue #53).

The ``pseudopeople`` package ships a sample of a simulated city (its census, Social
Security and W-2 tax records, with the package's default noise: typos, nicknames,
swapped date parts, copied values, missing fields) and each record's true person,
``simulant_id``. This set takes a seeded share of the census's people and every record
of theirs in the three sources, so the same person appears with different columns:

- census: name, middle initial, date of birth (MM/DD/YYYY), address, sex; whole
  households, so partners and children share a surname and an address;
- Social Security: name, middle name (its initial kept), SSN, date of birth (YYYYMMDD),
  sex; one record per event of a person (creation, death);
- W-2: name, middle initial, SSN, mailing address; no date of birth.

Columns are renamed to one layout, a value a source lacks is empty. Nothing is
normalised here: layouts of dates and SSNs differ by source, as they do in the files.
``noise`` scales every column's noise (``pseudopeople-noisy``: five times the default,
so a name is typed wrong, swapped for a nickname or a fake, or left blank in about a
quarter of the cells instead of one in twenty).

    python bench/pseudo.py > pseudopeople.jsonl
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np

SEED = 0  # the noise's seed and the share's
SHARE = 0.4  # of the census's people
COLUMNS = (
    "first_name",
    "middle_initial",
    "last_name",
    "date_of_birth",
    "ssn",
    "street_number",
    "street_name",
    "unit_number",
    "city",
    "state",
    "zipcode",
    "sex",
)


def pseudopeople_records(
    seed: int = SEED, share: float = SHARE, noise: float = 1.0
) -> list[dict[str, str]]:
    """The records of a ``share`` of the census's people in the three sources, shuffled,
    each with ``rec_id``, the :data:`COLUMNS` and ``simulant_id`` (gold); with every
    column's noise probability (per cell) ``noise`` times the package's default."""
    import pseudopeople as psp

    def make(generate: Any, dataset: str) -> Any:
        config = _scaled(psp.get_config()[dataset], noise)
        return generate(seed=seed, config={dataset: config}, verbose=False)

    census = make(psp.generate_decennial_census, "decennial_census")
    ssa = make(psp.generate_social_security, "social_security")
    w2 = make(psp.generate_taxes_w2_and_1099, "taxes_w2_and_1099")
    ssa["middle_initial"] = ssa["middle_name"].str[:1]
    return _linked({"census": census, "ssa": ssa, "w2": _mailing(w2)}, seed, share)


def other_sources(seed: int = SEED, share: float = SHARE) -> list[dict[str, str]]:
    """The records of a ``share`` of the census's people in the census and the sources
    :func:`pseudopeople_records` leaves out: the 1040 tax forms (the filer: name, SSN,
    mailing address), the American Community Survey, the Current Population Survey and
    WIC (name, date of birth, address), shuffled; columns and gold as there."""
    import pseudopeople as psp

    frames = {
        "census": psp.generate_decennial_census(seed=seed, verbose=False),
        "f1040": _mailing(psp.generate_taxes_1040(seed=seed, verbose=False)),
        "acs": psp.generate_american_community_survey(seed=seed, verbose=False),
        "cps": psp.generate_current_population_survey(seed=seed, verbose=False),
        "wic": psp.generate_women_infants_and_children(seed=seed, verbose=False),
    }
    return _linked(frames, seed, share)


def _linked(frames: dict[str, Any], seed: int, share: float) -> list[dict[str, str]]:
    """Every record of a seeded ``share`` of the census's people (``frames["census"]``)
    in each source, as ``rec_id`` (source and row), the :data:`COLUMNS` and
    ``simulant_id``; shuffled."""
    rng = np.random.default_rng(seed)
    people = np.array(sorted(set(frames["census"]["simulant_id"])))
    chosen = set(people[rng.random(people.size) < share])
    rows: list[dict[str, str]] = []
    for source, frame in frames.items():
        frame = frame[frame["simulant_id"].isin(chosen)]
        for i, rec in enumerate(frame.to_dict("records")):
            rows.append({"rec_id": f"{source}-{i}", **_columns(rec)})
    return [rows[i] for i in rng.permutation(len(rows))]


def _mailing(frame: Any) -> Any:
    """A tax source's mailing address under the census's address columns."""
    return frame.rename(columns={f"mailing_address_{c}": c for c in _ADDRESS})


def _scaled(config: dict[str, Any], factor: float) -> dict[str, Any]:
    """A dataset's noise config with each column's cell probabilities times ``factor``
    (at most 1); row noise as it is."""
    columns = {
        column: {
            kind: {
                key: min(1.0, value * factor) if key == "cell_probability" else value
                for key, value in params.items()
            }
            for kind, params in kinds.items()
        }
        for column, kinds in config["column_noise"].items()
    }
    return {"column_noise": columns}


_ADDRESS = ("street_number", "street_name", "unit_number", "city", "state", "zipcode")


def _columns(rec: dict[str, Any]) -> dict[str, str]:
    out = {c: _text(rec.get(c)) for c in COLUMNS}
    out["simulant_id"] = str(rec["simulant_id"])
    return out


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    text = str(value)
    return "" if text in ("nan", "<NA>", "None") else text


def main() -> None:
    for rec in pseudopeople_records():
        sys.stdout.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
