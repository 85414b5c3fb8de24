// icl view: keeps the runs table's status and progress current by polling /api/runs (no reload).
// Text goes in through textContent only: nothing from a run is ever parsed as HTML.
"use strict";
(function () {
  const table = document.querySelector("#runs tbody");
  if (!table) return;
  function row(run) {
    let tr = table.querySelector('tr[data-run="' + CSS.escape(run.key) + '"]');
    if (tr) return tr;
    const empty = table.querySelector("td[colspan]");
    if (empty) empty.parentElement.remove();
    tr = document.createElement("tr");
    tr.dataset.run = run.key;
    for (let i = 0; i < 10; i++) tr.appendChild(document.createElement("td"));
    const a = document.createElement("a");
    a.href = "/run?run=" + encodeURIComponent(run.key);
    a.textContent = run.key;
    tr.cells[0].appendChild(a);
    tr.cells[5].className = "status";
    tr.cells[6].className = "progress";
    const bar = document.createElement("span"); bar.className = "bar";
    const text = document.createElement("span"); text.className = "ptext";
    tr.cells[6].append(bar, " ", text);
    table.appendChild(tr);
    return tr;
  }
  function update(runs) {
    for (const run of runs) {
      const tr = row(run);
      tr.querySelector(".status").textContent = run.status;
      tr.querySelector(".ptext").textContent = run.text;
      tr.cells[7].textContent = String(run.failed);
      const facts = [[1, run.benchmark], [2, run.protocol], [3, run.models], [4, run.origin], [8, run.created],
                     [9, run.icl]];
      for (const [i, text] of facts) tr.cells[i].textContent = text;
      tr.cells[4].className = run.synthetic ? "synthetic" : "";
      const bar = tr.querySelector(".bar");
      if (run.percent === null) { bar.textContent = ""; continue; }
      let p = bar.querySelector("progress");
      if (!p) { p = document.createElement("progress"); p.max = 100; bar.appendChild(p); }
      p.value = run.percent;
    }
    document.body.dataset.updated = String(Date.now());
  }
  async function poll() {
    try {
      const r = await fetch("/api/runs", {credentials: "same-origin", cache: "no-store"});
      if (r.ok) update(await r.json());
    } catch (e) { /* the server stopped: keep the last state */ }
    setTimeout(poll, 1000);
  }
  setTimeout(poll, 1000);
})();
