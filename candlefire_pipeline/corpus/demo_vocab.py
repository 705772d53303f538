"""Vocabulary and sentence templates of the synthetic ALS-style demo corpus (project-written)."""

from __future__ import annotations

#: canonical drug name -> the spellings papers use for it (one spelling per paper).
DRUG_SPELLINGS: dict[str, tuple[str, ...]] = {
    "SPG302": ("SPG302", "SPG 302", "SPG-302"),
    "AMX0035": ("AMX0035", "AMX-0035"),
    "ATH-1105": ("ATH-1105", "ATH1105"),
    "tofersen": ("tofersen",),
    "riluzole": ("riluzole", "Riluzole"),
    "edaravone": ("edaravone",),
    "masitinib": ("masitinib",),
    "CNM-Au8": ("CNM-Au8",),
    "pridopidine": ("pridopidine",),
    "ibudilast": ("ibudilast", "MN-166"),
}

GENES = ("SOD1", "TDP-43", "C9orf72", "FUS", "TBK1", "NEK1", "UNC13A", "STMN2")

#: Mutation names: "Q-331K" is written with a hyphen at its letter -> digit boundary only, so the
#: term "Q331K" finds it through candle-fire's hyphen variant and through no other spelling.
MODELS = (
    "SOD1-G93A mice",
    "TDP-43 Q-331K mice",
    "patient-derived iPSC motor neurons",
    "zebrafish larvae",
    "a phase 2 cohort",
    "an open-label extension cohort",
    "primary cortical cultures",
    "a population-based registry",
)

OUTCOMES = (
    "motor neuron survival",
    "synaptic density",
    "ALSFRS-R decline",
    "survival to tracheostomy",
    "stress granule clearance",
    "axonal transport",
    "respiratory function",
)

DESIGNS = (
    "a randomized, placebo-controlled study",
    "a longitudinal observational study",
    "a preclinical dose-ranging study",
    "a retrospective chart review",
    "a post hoc analysis of trial data",
)

TITLE_TEMPLATES = (
    "{drug} improves {outcome} in {model}",
    "Effects of {drug} on {gene}-related pathology in {model}",
    "{gene} dysfunction and {outcome}: evidence from {model}",
    "Long-term {drug} exposure and {outcome} in amyotrophic lateral sclerosis",
    "Biomarkers of {gene} pathology in {model}",
    "A {design_short} of {drug} in {gene}-associated ALS",
)

DESIGN_SHORT = ("randomized trial", "cohort study", "dose-ranging study", "registry analysis")

ABSTRACT_SENTENCES = (
    "Amyotrophic lateral sclerosis (ALS) is a fatal disease of upper and lower motor neurons.",
    "We evaluated {drug} in {design} using {model}.",
    "Mislocalization of {gene} is a pathological hallmark in most cases.",
    "The primary endpoint was {outcome} at 24 weeks.",
    "Treatment with {drug} was associated with slower ALSFRS-R decline.",
    "Serum NF concentrations were measured at baseline and at follow-up.",
    "C9 carriers were analysed separately from non-carriers.",
    "Adverse events were mild and transient in most participants.",
    "These findings support further study of {drug} targeting {gene} biology.",
    "{outcome_cap} differed between groups (p = 0.0{digit}).",
)

MESH_TERMS = (
    "Amyotrophic Lateral Sclerosis",
    "Motor Neurons",
    "Neuroprotective Agents",
    "Superoxide Dismutase-1",
    "DNA-Binding Proteins",
    "C9orf72 Protein",
    "Mice, Transgenic",
    "Humans",
    "Animals",
    "Disease Progression",
    "Biomarkers",
    "Neurofilament Proteins",
    "Treatment Outcome",
)

#: Sentences per section kind. Terms here (rotarod, Hb9-GFP, CMAP, ChAT, hanging-wire) never
#: occur in titles, abstracts, MeSH terms or pre-marker text: they are body-only on purpose.
SECTION_SENTENCES: dict[str, tuple[str, ...]] = {
    "Introduction": (
        "Loss of {gene} function has been linked to neuromuscular junction denervation.",
        "Previous reports suggested that {drug} modulates synaptic maintenance.",
        "Few studies have examined {outcome} over more than one year.",
        "Genetic forms of ALS provide a tractable entry point for therapy.",
    ),
    "Methods": (
        "Motor performance was assessed on an accelerating rotarod twice weekly.",
        "Hb9-GFP reporter lines were used to count spinal motor neurons.",
        "CMAP amplitudes were recorded from the gastrocnemius muscle.",
        "Sections were processed for ChAT immunostaining and imaged blinded to group.",
        "{drug} was administered daily at three dose levels.",
        "A hanging-wire test was performed at weeks 8, 12 and 16.",
    ),
    "Results": (
        "Rotarod latency improved in treated animals relative to vehicle.",
        "CMAP amplitude was preserved in the high-dose group.",
        "The number of ChAT-positive neurons was higher after {drug} treatment.",
        "{gene} aggregates were reduced by {pct} percent.",
        "Hanging-wire endurance did not differ at week 8.",
    ),
    "Discussion": (
        "Our data indicate that {drug} acts on {gene}-dependent pathways.",
        "The effect on {outcome} was smaller in later-stage disease.",
        "Differences between models may reflect variable {gene} expression.",
    ),
    "Conclusion": (
        "{drug} warrants evaluation in a larger trial.",
        "Targeting {gene} remains a promising strategy.",
    ),
    "Statistical Analysis": (
        "Mixed-effects models were fitted with random intercepts per subject.",
        "Survival was compared with log-rank tests.",
    ),
    "Limitations": (
        "Sample sizes were modest and follow-up was limited.",
        "Sex differences could not be assessed reliably.",
    ),
    "Data Availability": ("Data are available from the corresponding author on request.",),
    "Ethics Statement": ("All procedures were approved by the institutional review board.",),
    "Supplementary Methods": (
        "Additional rotarod protocols are described in the supplement.",
        "Antibody dilutions are listed in the supplementary tables.",
    ),
}

CORE_SECTIONS = ("Introduction", "Methods", "Results", "Discussion", "Conclusion")
EXTRA_SECTIONS = (
    "Statistical Analysis",
    "Limitations",
    "Data Availability",
    "Ethics Statement",
    "Supplementary Methods",
)

#: Lines a full text may carry before its first [Section] marker (they join the Abstract chunk).
PREAMBLE_LINES = (
    "Running title: {drug} in ALS",
    "Keywords: amyotrophic lateral sclerosis; {gene}; neuroprotection",
)

#: Bracketed, but longer than 80 characters: body text, not a section marker.
LONG_BRACKET_LINE = (
    "[Note added in proof: the dosing schedule described below was amended after the interim "
    "safety review]"
)

SURNAMES = (
    "Alvarez", "Becker", "Chen", "Dubois", "Eriksen", "Fischer", "Garcia", "Haddad", "Ito",
    "Jensen", "Kowalski", "Larsen", "Moreau", "Nakamura", "Okafor", "Petrov", "Quinn", "Rossi",
    "Silva", "Tanaka", "Umar", "Virtanen", "Weber", "Xu", "Yilmaz", "Zhang",
)  # fmt: skip
INITIALS = "ABCDEFGHJKLMNPRSTW"
