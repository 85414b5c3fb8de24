"""``icl view``: a local web app that browses run folders while they are written and after.

    python -m icl.run view [DIR ...] [--port N] [--host H]     # default DIR: runs/

It only reads: each run's ``store.sqlite`` is opened read-only (never the run's lock, never a
write into a run folder); what it derives (a per-store index for paging and filtering in SQL,
thumbnails) lives in its own cache, ``$ICL_CACHE/view``. Pages are rendered on the server with
real links whose query strings reproduce every view; the one script (``static/live.js``) only
refreshes the runs page's progress. docs/runs.md "Browsing runs: icl view" describes the pages.

Modules: :mod:`icl.view.runs` (finding run folders and their status), :mod:`icl.view.index`
(the cache database and its queries), :mod:`icl.view.pages` (HTML), :mod:`icl.view.server`
(HTTP, security), :mod:`icl.view.requests` (a helper process rebuilding what the model saw),
:mod:`icl.view.cli` (the command).
"""
