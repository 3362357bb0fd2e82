"""Typed run records: the one source of truth for what a run wrote.

Every model forbids unknown fields, so a record from a newer or corrupted run fails
loudly on load instead of being half-understood. Reports, ``score`` and ``compare`` read
these records, never live state. ``schemas/`` holds the JSON Schema generated from them
(``auditor schemas``).

Layout: :mod:`~auditor.records.base` is the envelope every study's record shares,
:mod:`~auditor.records.models` and :mod:`~auditor.records.images` the model references,
settings and stage outputs the studies share, then one module per kind of study
(:mod:`~auditor.records.prompt_audit`, :mod:`~auditor.records.t2iat`, :mod:`~auditor.records.amplification`,
:mod:`~auditor.records.trace`, :mod:`~auditor.records.batch`, :mod:`~auditor.records.explore`).
:func:`load_any_record` reads any of them, upgrading older schema versions
(:mod:`~auditor.records.migrations`).
"""

from auditor.records.amplification import (
    AmplificationConfig,
    AmplificationRecord,
    AmplificationSummary,
    CaptionLabels,
    ClassifierSettings,
    FaceDetectorSettings,
    GeneratedSide,
    ImageCounts,
    ImageGender,
    OccupationAmplification,
    Share,
    TBasis,
    TrainingData,
    TrainingSide,
)
from auditor.records.base import (
    SCHEMA_VERSION,
    Environment,
    RunError,
    RunStatus,
    Stage,
    StageTiming,
    StudyConfig,
    StudyRecord,
    utc_now,
)
from auditor.records.batch import BatchAudit, BatchConfig, BatchRecord, BatchRow
from auditor.records.explore import (
    Arm,
    ArmScore,
    ArmStep,
    Candidate,
    Confirmation,
    ExploreConfig,
    ExploreRecord,
    Objective,
    Round,
    StopReason,
)
from auditor.records.images import GeneratedImage, ImageAnswers, PromptSet
from auditor.records.intervals import Correction, Difference, Interval, IntervalSettings
from auditor.records.kinds import RECORD_TYPES, AnyRecord
from auditor.records.loading import load_any_record, load_record
from auditor.records.models import (
    CasNormalization,
    GenerationSettings,
    ModelRef,
    PerceptionSettings,
    ScoringSettings,
)
from auditor.records.prompt_audit import (
    INITIAL_PROMPT_ID,
    AuditPlan,
    AxisPlan,
    AxisScore,
    ChatMessage,
    ConceptFrequency,
    CounterfactualScore,
    IntersectionView,
    RunConfig,
    RunRecord,
    Scores,
    SetConcepts,
    counterfactual_id,
)
from auditor.records.record import Record
from auditor.records.sources import CaptionFile
from auditor.records.t2iat import (
    T2IAT_GROUPS,
    AssociationResult,
    EffectLabel,
    OccupationAssociation,
    OccupationsConfig,
    OccupationsRecord,
    T2IATConfig,
    T2IATGroup,
    T2IATRecord,
    T2IATStimuli,
    T2IATTestDefinition,
)
from auditor.records.trace import (
    TRIPLET_SETS,
    CaptionSelection,
    ChiSquareResult,
    GroupAssignment,
    GroupSummary,
    ImageObjects,
    ObjectCount,
    PairSimilarity,
    StageSimilarity,
    TraceConfig,
    TracedDetection,
    TraceRecord,
    TraceScoringSettings,
    TraceTriplet,
    TripletPicture,
    TripletSet,
)

__all__ = [
    "INITIAL_PROMPT_ID", "RECORD_TYPES", "SCHEMA_VERSION", "T2IAT_GROUPS",
    "AmplificationConfig", "AmplificationRecord", "AmplificationSummary", "CaptionFile", "CaptionLabels",
    "ClassifierSettings", "FaceDetectorSettings", "GeneratedSide", "ImageCounts", "ImageGender",
    "OccupationAmplification", "Share", "TBasis", "TrainingData", "TrainingSide",
    "AnyRecord", "Arm", "ArmScore", "ArmStep", "AssociationResult", "AuditPlan", "AxisPlan", "AxisScore",
    "BatchAudit", "BatchConfig", "BatchRecord", "BatchRow", "Candidate", "CasNormalization", "ChatMessage",
    "Confirmation", "ExploreConfig", "ExploreRecord", "Objective", "Round", "StopReason",
    "ConceptFrequency", "Correction", "CounterfactualScore", "Difference", "Interval", "IntervalSettings", "EffectLabel", "Environment", "GeneratedImage", "GenerationSettings",
    "ImageAnswers", "IntersectionView", "ModelRef", "OccupationAssociation", "OccupationsConfig",
    "OccupationsRecord", "PerceptionSettings", "PromptSet", "Record", "RunConfig", "RunError", "RunRecord",
    "RunStatus", "Scores", "ScoringSettings", "SetConcepts", "Stage", "StageTiming", "StudyConfig", "StudyRecord",
    "T2IATConfig", "T2IATGroup", "T2IATRecord", "T2IATStimuli", "T2IATTestDefinition",
    "TRIPLET_SETS", "CaptionSelection", "ChiSquareResult", "GroupAssignment", "GroupSummary", "ImageObjects",
    "ObjectCount", "PairSimilarity", "StageSimilarity", "TraceConfig", "TraceRecord", "TraceScoringSettings",
    "TracedDetection", "TraceTriplet", "TripletPicture", "TripletSet",
    "counterfactual_id", "load_any_record", "load_record", "utc_now",
]  # fmt: skip
