"""Records -> unit vectors: featurizer config, record validation, encoding (DESIGN §5)."""

from er.featurize._config import (
    DEFAULT_DIM,
    ENCODERS,
    FeaturizerConfig,
    FieldSpec,
    infer_config,
)
from er.featurize._encode import Featurizer, featurize, normalize_text
from er.featurize._validate import RecordValidator, record_schema

__all__ = [
    "DEFAULT_DIM",
    "ENCODERS",
    "Featurizer",
    "FeaturizerConfig",
    "FieldSpec",
    "RecordValidator",
    "featurize",
    "infer_config",
    "normalize_text",
    "record_schema",
]
