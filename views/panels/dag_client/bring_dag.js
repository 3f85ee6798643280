// Bring the DAG's chart `gd` into view in its page (`host`, the page's window). Our own code, run
// in a same-origin frame: the DAG client's (views/panels/dag_client/index.html) and the one-off
// script of views/panels/graph.py `SCROLL_JS` (a call chosen below the chart after the chart was
// drawn). In the split view (panes side by side) the page scrolls to the split's top, so the
// call's detail keeps its title in view, and the graph's own pane scrolls to the chart; else the
// chart is centred.
function rgBringDagIntoView(gd, host) {
  const rect = gd.getBoundingClientRect();
  if (rect.top >= 0 && rect.bottom <= host.innerHeight) return;
  const split = gd.closest('.st-key-rg-split');
  const cols = split ? Array.from(split.querySelectorAll(':scope > [data-testid=stLayoutWrapper] > [data-testid=stHorizontalBlock] > [data-testid=stColumn]')) : [];
  if (cols.length < 2 || cols[1].getBoundingClientRect().left < cols[0].getBoundingClientRect().right - 10) {
    gd.scrollIntoView({ block: "center", behavior: "instant" });
    return;
  }
  split.scrollIntoView({ block: "start", behavior: "instant" });
  let pane = gd.parentElement;
  while (pane && pane !== split && !(pane.scrollHeight > pane.clientHeight + 4 && /(auto|scroll)/.test(getComputedStyle(pane).overflowY)))
    pane = pane.parentElement;
  if (!pane || pane === split) return;
  const r = gd.getBoundingClientRect(), p = pane.getBoundingClientRect();
  if (r.top < p.top + 60) pane.scrollTop -= p.top + 60 - r.top;  // under the pane's sticky switch
  else if (r.bottom > p.bottom) pane.scrollTop += Math.min(r.bottom - p.bottom + 8, r.top - p.top - 60);
}
