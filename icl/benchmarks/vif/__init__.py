"""VIF-Bench (PROTOCOL §5; docs/vif.md): multi-reference image generation under visual instructions.

Modules: ``schema`` (task records, release loader), ``render`` (VI images), ``texts`` (TI
Dense/Medium/Sparse), ``synthetic`` (built-in tasks), ``spatial`` (where subjects landed),
``rubric`` (judge template and parser), ``models`` (collage baseline, spatial judge), ``tables``
(breakdowns, reliability, plots), ``benchmark`` (the runner plugin).
"""
