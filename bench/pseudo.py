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


def pseudopeople_records(seed: int = SEED, share: float = SHARE) -> list[dict[str, str]]:
    """The records of a ``share`` of the census's people in the three sources, shuffled,
    each with ``rec_id``, the :data:`COLUMNS` and ``simulant_id`` (gold)."""
    import pseudopeople as psp

    census = psp.generate_decennial_census(seed=seed, verbose=False)
    ssa = psp.generate_social_security(seed=seed, verbose=False)
    w2 = psp.generate_taxes_w2_and_1099(seed=seed, verbose=False)
    ssa["middle_initial"] = ssa["middle_name"].str[:1]
    w2 = w2.rename(columns={f"mailing_address_{c}": c for c in _ADDRESS})
    rng = np.random.default_rng(seed)
    people = np.array(sorted(set(census["simulant_id"])))
    chosen = set(people[rng.random(people.size) < share])
    rows: list[dict[str, str]] = []
    for source, frame in (("census", census), ("ssa", ssa), ("w2", w2)):
        frame = frame[frame["simulant_id"].isin(chosen)]
        for i, rec in enumerate(frame.to_dict("records")):
            rows.append({"rec_id": f"{source}-{i}", **_columns(rec)})
    return [rows[i] for i in rng.permutation(len(rows))]


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
