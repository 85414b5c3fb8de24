"""Vision-language chat models behind :class:`~icl.models.requests.ChatRequest`.

- ``hf-vlm`` (:mod:`icl.models.vlm.hf`): transformers image-text-to-text models, local weights.
- ``openai`` (:mod:`icl.models.vlm.openai`): OpenAI-compatible chat-completions servers.

Both answer one ``str`` per request, or an exception instance in that request's slot
(:class:`~icl.models.ContextOverflowError` for a prompt that does not fit; for ``openai`` also
a :class:`~icl.models.vlm.openai.ChatServerError` after its retries): the rest of the batch is
answered. Nothing heavy is imported here.
"""
