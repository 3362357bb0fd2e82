"""Prompt text the studies make, read or check, before any image is made.

For the prompt-to-image tracing study (Wu et al., J. Imaging 2025): ``wordlists``, the
paper's words that indicate humans (Table 2) as data, and whole-word matching;
``triplets``, neutral/feminine/masculine prompt triplets from captions and from profession
templates; ``nouns``, nouns of free text (a VQA answer, a prompt) through WordNet, with
human words told apart from objects. For ``auditor batch``: ``lists``, prompt files and
templates filled from values. For ``auditor explore``: ``topics``, the offline proposer
(templates x WordNet nouns), and ``guard``, which refuses candidates that name an axis's
value or repeat an earlier one (with a sentence embedder and the content cache, where given).
"""
