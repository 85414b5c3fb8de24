"""CoBSAT (PROTOCOL §4): the ``cobsat`` benchmark plugin, its vocabularies (:mod:`.vocab`, shared
with VL-ICL's ``cobsat`` task), prompt lists (:mod:`.prompts`), the reference's instructions and
judge questions, CoBSAT-lite and its deterministic judge (model ``cobsat-judge``).

Options (``--name value``): ``tasks``, ``shots`` (0,2,4,6,8), ``prompts`` (1,000), ``legacy_prompts``,
``seed``, ``gen_mode`` (image | description), ``variant`` (default | instruct | exact | misleading |
caption | cot), ``family`` (the reference's instruction family), ``lite``, ``human_labels``.
"""

from __future__ import annotations

from icl.benchmarks.cobsat.benchmark import CoBSAT

__all__ = ["CoBSAT"]
