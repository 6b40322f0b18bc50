// Messages: browse a topic from a point, search it (streamed, with a progress count), and
// produce a record from a form.
"use strict";

function showValue(d) {
  if (!d || d.format === "null") return el("span", {class: "muted"}, "null");
  const text = typeof d.value === "string" ? d.value : JSON.stringify(d.value, null, 2);
  return el("div", {},
    el("span", {class: "badge"}, d.format + (d.schema_id !== undefined ? " #" + d.schema_id : "")),
    d.error ? el("span", {class: "status-ERR"}, d.error) : null,
    el("pre", {}, text + (d.cut ? "\n(cut: " + fmtBytes(d.size) + " in all)" : "")));
}

function recordTable(rows, testid) {
  return table([{title: "Partition", key: "partition"}, {title: "Offset", key: "offset", num: true},
                {title: "Timestamp", render: r => fmtTime(r.timestamp)},
                {title: "Key", render: r => showValue(r.key)}, {title: "Value", render: r => showValue(r.value)},
                {title: "Headers", render: r => el("pre", {}, r.headers.map(h => `${h.name}: ${h.value}`).join("\n"))}],
               rows, {"data-testid": testid});
}

C.pages.messages = (page, _rest, params) => {
  const topic = el("input", {name: "topic", required: true, value: params.get("topic") || "",
                             list: "topic-names", "data-testid": "msg-topic"});
  const names = el("datalist", {id: "topic-names"});
  api("GET", "/api/topics?size=500").then(r => names.replaceChildren(
    ...r.topics.map(t => el("option", {value: t.name})))).catch(() => {});
  const partition = el("input", {name: "partition", placeholder: "all", size: 5, "data-testid": "msg-partition"});
  const start = el("select", {name: "start", "data-testid": "msg-start"},
    ["newest", "oldest", "offset", "timestamp"].map(s => el("option", {value: s}, s)));
  const at = el("input", {name: "at", placeholder: "offset, or ms / ISO time", "data-testid": "msg-at"});
  const order = el("select", {name: "order", "data-testid": "msg-order"}, el("option", {value: "newest"}, "newest first"),
    el("option", {value: "oldest"}, "oldest first"));
  const limit = el("input", {name: "limit", value: "50", size: 5, "data-testid": "msg-limit"});
  const results = el("div", {"data-testid": "msg-results"});
  const common = () => ({partition: partition.value.trim(), start: start.value, at: at.value.trim()});
  const need = () => {
    const t = topic.value.trim();
    if (!t) throw new Error("give a topic");
    history.replaceState({}, "", "/messages?topic=" + encodeURIComponent(t));
    return t;
  };

  const browse = el("button", {type: "button", "data-testid": "msg-browse"}, "Browse");
  browse.addEventListener("click", () => act(browse, async () => {
    const qs = new URLSearchParams({...common(), order: order.value, limit: limit.value.trim()});
    const r = await api("GET", `/api/topics/${encodeURIComponent(need())}/messages?` + qs);
    results.replaceChildren(el("p", {class: "muted"}, `${r.records.length} record(s)`),
                            recordTable(r.records, "records-table"));
    return r;
  }, r => `Read ${r.records.length} record(s).`));

  // search: the answer is NDJSON, read as it streams
  const fkey = el("input", {name: "key", placeholder: "key contains", "data-testid": "search-key"});
  const fvalue = el("input", {name: "value", placeholder: "value contains", "data-testid": "search-value"});
  const fheader = el("input", {name: "header", placeholder: "NAME or NAME=VALUE", "data-testid": "search-header"});
  const fpath = el("input", {name: "json_path", placeholder: "a.b.0=VALUE", "data-testid": "search-json"});
  const progress = el("div", {class: "progress", "data-testid": "search-progress"});
  const searchBtn = el("button", {type: "button", "data-testid": "msg-search"}, "Search");
  let controller = null;
  const stopBtn = el("button", {type: "button", class: "secondary", hidden: true,
                                onclick: () => controller && controller.abort()}, "Stop");
  searchBtn.addEventListener("click", () => act(searchBtn, async () => {
    const qs = new URLSearchParams({...common(), key: fkey.value, value: fvalue.value,
                                    header: fheader.value, json_path: fpath.value});
    if (start.value === "newest") qs.set("start", "newest");
    controller = new AbortController();
    stopBtn.hidden = false;
    const found = [];
    const tbody = el("div", {});
    results.replaceChildren(progress, tbody);
    let done = null;
    try {
      const resp = await fetch(`/api/topics/${encodeURIComponent(need())}/search?` + qs,
                               {signal: controller.signal});
      if (!resp.ok) {
        const err = await resp.json().catch(() => ({error: resp.statusText}));
        throw new Error(err.error);
      }
      const reader = resp.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      let redraw = 0;
      for (;;) {
        const {value, done: end} = await reader.read();
        if (end) break;
        buf += dec.decode(value, {stream: true});
        let nl;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const ev = JSON.parse(buf.slice(0, nl));
          buf = buf.slice(nl + 1);
          if (ev.error) throw new Error(ev.error);
          if (ev.match) found.push(ev.match);
          if (ev.progress !== undefined)
            progress.textContent = `scanned ${fmtNum(ev.progress)} of ${fmtNum(ev.of)}, ${fmtNum(found.length)} match(es)`;
          if (ev.done !== undefined) {
            done = ev;
            progress.textContent = `done: scanned ${fmtNum(ev.done)} of ${fmtNum(ev.of)}, ${fmtNum(ev.matches)} match(es)`;
          }
          if (ev.match && Date.now() - redraw > 200) {
            tbody.replaceChildren(recordTable(found, "search-table"));
            redraw = Date.now();
          }
        }
      }
    } finally {
      stopBtn.hidden = true;
    }
    tbody.replaceChildren(recordTable(found, "search-table"));
    return done || {matches: found.length, done: "?"};
  }, d => `Search done: ${d.matches} match(es) in ${fmtNum(d.done)} record(s).`));

  const produceForm = el("form", {"data-testid": "produce"},
    el("h2", {}, "Produce a record"),
    el("label", {}, "Partition (empty: by key)", el("input", {name: "partition", size: 5})),
    el("label", {}, "Key", el("input", {name: "key", "data-testid": "produce-key"})),
    el("label", {}, "Value", el("textarea", {name: "value", "data-testid": "produce-value"})),
    el("label", {}, "Headers (name=value per line)", el("textarea", {name: "headers", "data-testid": "produce-headers"})),
    el("div", {}, el("button", {type: "submit", "data-testid": "produce-send"}, "Send")));
  produceForm.addEventListener("submit", (e) => {
    e.preventDefault();
    const f = new FormData(produceForm);
    act(produceForm.querySelector("button"), async () => {
      const headers = Object.entries(parseConfigLines(f.get("headers"))).map(([name, value]) => ({name, value}));
      return api("POST", `/api/topics/${encodeURIComponent(need())}/messages`,
                 {partition: f.get("partition").trim(), key: f.get("key"), value: f.get("value"), headers});
    }, r => `Produced to partition ${r.partition} at offset ${r.offset}.`);
  });

  page.append(el("h1", {}, "Messages"),
    el("form", {onsubmit: e => e.preventDefault()},
      el("label", {}, "Topic", topic, names), el("label", {}, "Partition", partition),
      el("label", {}, "Start", start), el("label", {}, "At", at), el("label", {}, "Order", order),
      el("label", {}, "Limit", limit), el("div", {}, browse),
      el("h2", {}, "Search"),
      el("label", {}, "Key", fkey), el("label", {}, "Value", fvalue), el("label", {}, "Header", fheader),
      el("label", {}, "JSON path", fpath), el("div", {}, searchBtn, stopBtn)),
    results, produceForm);
};
