// Consumer groups: the paged list; one group's members, lag per partition and in total, its
// lag over time (plotly), Burrow's status, reset offsets with a dry run, delete.
"use strict";

C.pages.groups = (page, id) => id ? groupDetail(page, id) : groupList(page);

function groupList(page) {
  const state = {q: "", page: 1, pages: 1, total: 0};
  const list = el("div", {});
  const search = el("input", {type: "search", placeholder: "search groups", "data-testid": "group-search"});
  search.addEventListener("input", () => { state.q = search.value; state.page = 1; load(); });
  const load = async () => {
    let r;
    try { r = await api("GET", "/api/groups?" + new URLSearchParams({q: state.q, page: state.page})); }
    catch (e) { notify(e.message, "error"); return; }
    Object.assign(state, {page: r.page, pages: r.pages, total: r.total});
    list.replaceChildren(
      table([{title: "Group", render: g => link("/groups/" + encodeURIComponent(g.id), g.id)},
             {title: "State", key: "state"}, {title: "Type", key: "type"}], r.groups,
            {"data-testid": "groups-table"}),
      pager(state, load));
  };
  page.append(el("h1", {}, "Consumer groups"), search, list);
  load();
  every(5000, load);
}

function lagChart(box, samples) {
  if (typeof Plotly === "undefined") { box.textContent = "the charting library did not load"; return; }
  const x = samples.map(s => new Date(s.ts));
  const traces = [{x, y: samples.map(s => s.total), name: "total lag", mode: "lines+markers", type: "scatter"}];
  Plotly.react(box, traces, {margin: {t: 20, r: 10, b: 40, l: 60}, yaxis: {title: {text: "records"}, rangemode: "tozero"},
                             xaxis: {type: "date"}, showlegend: true},
               {displaylogo: false, responsive: true});
}

async function groupDetail(page, id) {
  const enc = encodeURIComponent(id);
  page.append(el("h1", {}, "Group ", el("span", {"data-testid": "group-id"}, id)),
              el("p", {}, link("/groups", "all groups")));
  const head = el("div", {}), parts = el("div", {});
  const chart = el("div", {class: "chart", "data-testid": "lag-chart"});
  const chartNote = el("p", {class: "muted", "data-testid": "lag-samples"});
  const load = async () => {
    let g;
    try { g = await api("GET", "/api/groups/" + enc); } catch (e) { notify(e.message, "error"); return; }
    head.replaceChildren(el("div", {class: "cards"},
      el("div", {class: "card"}, el("div", {class: "n", "data-testid": "group-state"}, g.state), el("div", {class: "l"}, "state")),
      el("div", {class: "card"}, el("div", {class: "n", "data-testid": "total-lag"}, fmtNum(g.total_lag)), el("div", {class: "l"}, "total lag")),
      el("div", {class: "card"}, el("div", {class: "n status-" + g.status, "data-testid": "group-status"}, g.status), el("div", {class: "l"}, "status (Burrow's rules)")),
      el("div", {class: "card"}, el("div", {class: "n"}, g.members.length), el("div", {class: "l"}, "members"))),
      el("p", {class: "muted"}, `coordinator ${g.coordinator || "-"}, assignor ${g.assignor || "-"}`),
      el("h2", {}, "Members"),
      g.members.length ? table([{title: "Member", key: "id"}, {title: "Client", key: "client_id"},
                                {title: "Host", key: "host"}, {title: "Assignment", render: m => m.assignment.join(", ")}],
                               g.members, {"data-testid": "members-table"})
                       : el("p", {class: "muted"}, "No active members."));
    parts.replaceChildren(table([{title: "Topic", key: "topic"}, {title: "Partition", key: "partition"},
      {title: "Committed", num: true, render: r => fmtNum(r.committed)}, {title: "End", num: true, render: r => fmtNum(r.end)},
      {title: "Lag", num: true, render: r => fmtNum(r.lag)}, {title: "Member", render: r => r.member || "-"},
      {title: "Status", render: r => el("span", {class: "status-" + r.status}, r.status)},
      {title: "Behind for", num: true, render: r => r.lag_ms ? (r.lag_ms / 1000).toFixed(1) + " s" : "0"}],
      g.partitions, {"data-testid": "lag-table"}));
  };
  const loadChart = async () => {
    try {
      const h = await api("GET", `/api/groups/${enc}/history?minutes=60`);
      chartNote.textContent = `${h.samples.length} sample(s) in the last hour, sampled every few seconds`;
      chartNote.dataset.count = h.samples.length;
      lagChart(chart, h.samples);
    } catch (e) { notify(e.message, "error"); }
  };

  const plan = el("div", {"data-testid": "reset-plan"});
  const reset = el("form", {"data-testid": "reset-form"},
    el("h2", {}, "Reset offsets"),
    el("p", {class: "muted"}, "The group must have no active members. Preview first, then apply."),
    el("label", {}, "To", el("select", {name: "mode", "data-testid": "reset-mode"},
      ["earliest", "latest", "offset", "timestamp"].map(m => el("option", {value: m}, m)))),
    el("label", {}, "Offset or time (ms / ISO)", el("input", {name: "value", "data-testid": "reset-value"})),
    el("label", {}, "Topic (empty: all the group has)", el("input", {name: "topic", "data-testid": "reset-topic"})),
    el("div", {}, el("button", {type: "button", class: "secondary", "data-testid": "reset-dry-run", value: "dry"}, "Dry run"),
                  el("button", {type: "button", "data-testid": "reset-apply", value: "apply"}, "Apply")),
    plan);
  reset.querySelectorAll("button").forEach(b => b.addEventListener("click", () => {
    const f = new FormData(reset);
    const dry = b.value === "dry";
    act(b, async () => {
      const r = await api("POST", `/api/groups/${enc}/reset`, {mode: f.get("mode"), value: f.get("value"),
                          topic: f.get("topic"), dry_run: dry});
      plan.replaceChildren(el("p", {}, dry ? "Preview (nothing written):" : "Applied:"),
        table([{title: "Topic", key: "topic"}, {title: "Partition", key: "partition"},
               {title: "Current", num: true, render: p => fmtNum(p.current)},
               {title: "New", num: true, key: "new"}], r.plan, {"data-testid": dry ? "plan-preview" : "plan-applied"}));
      if (!dry) load();
      return r;
    }, r => dry ? `Dry run: ${r.plan.length} partition(s) would move; nothing was written.`
                : `Reset ${r.plan.length} partition(s) of ${id}.`);
  }));

  const del = el("button", {class: "danger", "data-testid": "delete-group"}, "Delete group");
  const sure = el("button", {class: "danger", hidden: true, "data-testid": "confirm-delete-group"}, `Yes, delete ${id}`);
  del.addEventListener("click", () => { sure.hidden = false; });
  sure.addEventListener("click", () => act(sure, async () => {
    await api("DELETE", "/api/groups/" + enc);
    go("/groups");
  }, `Deleted group ${id}.`));

  page.append(head, el("h2", {}, "Lag over time"), chart, chartNote, el("h2", {}, "Lag per partition"), parts,
              reset, el("div", {class: "panel"}, del, sure));
  await load();
  loadChart();
  every(5000, () => { load(); loadChart(); });
}
