"""Image generators and image judges behind :class:`~icl.models.requests.GenerationRequest`
and :class:`~icl.models.requests.ChatRequest` (docs/generators.md).

- ``diffusers-t2i`` (:mod:`.diffusers_t2i`): any local ``AutoPipelineForText2Image`` folder;
  ``flux-kontext`` and ``qwen-image-edit`` (same module): the multi-reference editing pipelines.
- ``janus`` (:mod:`.janus`): DeepSeek Janus / Janus-Pro through transformers, images and text.
- ``openai-images`` (:mod:`.openai_images`): ``/v1/images/generations`` and ``/v1/images/edits``.
- ``clip-judge`` (:mod:`.clip_judge`): CLIP / SigLIP yes/no and nearest-label answers.

Every generator keeps one :class:`~icl.models.t2i.common.GenerationRecord` per image it made
(seed, steps, size, latency, peak memory) in ``adapter.records``.
"""
