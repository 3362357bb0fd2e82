"""Prompt text for the prompt-to-image tracing study (Wu et al., J. Imaging 2025).

``wordlists``: the paper's words that indicate humans (Table 2) as data, and whole-word
matching; ``triplets``: neutral/feminine/masculine prompt triplets from captions and from
profession templates; ``nouns``: nouns of free text (a VQA answer, a prompt) through
WordNet, with human words told apart from objects. Pure text: no models, no records.
"""
