"""Records -> typed, normalised fields and unit vectors: field types and normalisers,
featurizer config, record validation, encoding (DESIGN §5)."""

from er.featurize._config import (
    DEFAULT_DIM,
    ENCODERS,
    FeaturizerConfig,
    FieldSpec,
    infer_config,
    left_out_fields,
)
from er.featurize._encode import Featurizer, featurize, normalize_text
from er.featurize._normalize import MONTH_WORDS, NORMALISERS, missing, normalise, read_date
from er.featurize._typed import FieldTypes, NormalisedBatch
from er.featurize._types import FIELD_TYPES, infer_field_types
from er.featurize._validate import RecordValidator, record_schema

__all__ = [
    "DEFAULT_DIM",
    "ENCODERS",
    "FIELD_TYPES",
    "MONTH_WORDS",
    "NORMALISERS",
    "Featurizer",
    "FeaturizerConfig",
    "FieldSpec",
    "FieldTypes",
    "NormalisedBatch",
    "RecordValidator",
    "featurize",
    "infer_config",
    "infer_field_types",
    "left_out_fields",
    "missing",
    "normalise",
    "normalize_text",
    "read_date",
    "record_schema",
]
