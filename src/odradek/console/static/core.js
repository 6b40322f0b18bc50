// The console's shell: helpers, the API call, notices, the router and the Overview page.
"use strict";

const C = {pages: {}, timers: [], info: {}};

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

async function api(method, path, body) {
  const opts = {method, headers: {}};
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, opts);
  } catch (e) {
    throw new Error("the console did not answer: " + e.message);
  }
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = {error: text}; }
  if (!resp.ok) throw new Error((data && data.error) || resp.status + " " + resp.statusText);
  return data;
}

function notify(message, kind) {
  const box = document.getElementById("notice");
  box.textContent = message;
  box.className = kind || "ok";
  box.hidden = false;
  box.dataset.kind = kind || "ok";
}

function clearNotice() { document.getElementById("notice").hidden = true; }

// An action button: runs fn, shows its result or its error, never fails silently.
async function act(button, fn, okText) {
  if (button) button.disabled = true;
  try {
    const out = await fn();
    const text = typeof okText === "function" ? okText(out) : okText;
    if (text) notify(text, "ok");
    return out;
  } catch (e) {
    notify(e.message, "error");
    return undefined;
  } finally {
    if (button) button.disabled = false;
  }
}

function fmtNum(n) {
  if (n === null || n === undefined || n < 0) return "-";
  return Number(n).toLocaleString("en-US");
}

function fmtBytes(n) {
  if (n === null || n === undefined) return "-";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + units[i];
}

function fmtTime(ms) { return ms > 0 ? new Date(ms).toISOString().replace("T", " ").slice(0, 23) : "-"; }

function table(columns, rows, attrs) {
  return el("table", attrs || {},
    el("thead", {}, el("tr", {}, columns.map(c => el("th", {class: c.num ? "num" : null}, c.title)))),
    el("tbody", {}, rows.map(r => el("tr", {}, columns.map(c => {
      const v = c.render ? c.render(r) : r[c.key];
      return el("td", {class: c.num ? "num" : null}, v instanceof Node ? v : (v === null || v === undefined ? "-" : String(v)));
    })))));
}

function pager(state, reload) {
  return el("div", {class: "pager", "data-testid": "pager"},
    el("button", {class: "secondary", disabled: state.page <= 1,
                  onclick: () => { state.page -= 1; reload(); }}, "Previous"),
    el("span", {}, `page ${state.page} of ${state.pages} (${fmtNum(state.total)} in all)`),
    el("button", {class: "secondary", disabled: state.page >= state.pages,
                  onclick: () => { state.page += 1; reload(); }}, "Next"));
}

function link(href, text) {
  return el("a", {href, onclick: (e) => { e.preventDefault(); go(href); }}, text);
}

function every(ms, fn) { C.timers.push(setInterval(fn, ms)); }

function go(href) { history.pushState({}, "", href); route(); }

function route() {
  C.timers.forEach(clearInterval);
  C.timers = [];
  clearNotice();
  const path = decodeURIComponent(location.pathname);
  const parts = path.split("/").filter(Boolean);
  const section = parts[0] || "overview";
  document.querySelectorAll("header nav a").forEach(a =>
    a.classList.toggle("active", a.dataset.nav === section));
  const page = document.getElementById("page");
  page.replaceChildren();
  const render = C.pages[section];
  if (!render) { page.append(el("h1", {}, "Not found"), el("p", {}, `No page ${path}.`)); return; }
  render(page, parts.slice(1).join("/"), new URLSearchParams(location.search));
}

C.pages.overview = (page) => {
  page.append(el("h1", {}, "Overview"));
  const body = el("div", {"data-testid": "overview"}, el("p", {class: "muted"}, "Loading..."));
  page.append(body, el("p", {class: "muted"}, "Numbers update every 3 seconds."));
  const load = async () => {
    let o;
    try { o = await api("GET", "/api/overview"); } catch (e) { notify(e.message, "error"); return; }
    const card = (label, n, cls, id) => el("div", {class: "card " + (cls || ""), "data-testid": id},
      el("div", {class: "n"}, n), el("div", {class: "l"}, label));
    const fenced = o.brokers.filter(b => b.fenced).length;
    body.replaceChildren(
      el("div", {class: "cards"},
        card("brokers", o.brokers.length, "", "card-brokers"),
        card("fenced brokers", o.admin ? fenced : "?", fenced ? "bad" : "ok", "card-fenced"),
        card("controller", o.controller ?? "none", o.controller === null ? "bad" : "", "card-controller"),
        card("topics", fmtNum(o.topics), "", "card-topics"),
        card("partitions", fmtNum(o.partitions), "", "card-partitions"),
        card("under-replicated", fmtNum(o.under_replicated), o.under_replicated ? "bad" : "ok", "card-urp"),
        card("offline", fmtNum(o.offline), o.offline ? "bad" : "ok", "card-offline")),
      el("h2", {}, "Brokers"),
      table([{title: "ID", key: "id"}, {title: "Host", render: b => `${b.host}:${b.port}`},
             {title: "Rack", render: b => b.rack || "-"},
             {title: "Fenced", render: b => o.admin ? (b.fenced ? "yes" : "no") : "?"},
             {title: "Controller", render: b => b.controller ? "yes" : ""},
             {title: "Leaders", key: "leaders", num: true}, {title: "Replicas", key: "replicas", num: true},
             {title: "Disk", num: true, render: b => fmtBytes(b.disk_bytes)}], o.brokers,
            {"data-testid": "brokers"}),
      el("h2", {}, "Controller quorum"),
      o.quorum ? table([{title: "Leader", key: "leader_id"}, {title: "Epoch", key: "leader_epoch", num: true},
                        {title: "High watermark", key: "high_watermark", num: true},
                        {title: "Voters", render: q => (q.voters || []).join(", ")}], [o.quorum],
                       {"data-testid": "quorum"})
              : el("p", {class: "muted"}, o.admin_error ? "admin HTTP: " + o.admin_error
                   : "Start the console with --admin URL (a node's admin.listeners) to see the quorum, fenced brokers and disk use."));
  };
  load();
  every(3000, load);
};

window.addEventListener("popstate", route);
document.addEventListener("DOMContentLoaded", async () => {
  document.querySelectorAll("header nav a").forEach(a => a.addEventListener("click", e => {
    e.preventDefault(); go(a.getAttribute("href"));
  }));
  try {
    C.info = await api("GET", "/api/info");
    document.getElementById("cluster-name").textContent = C.info.bootstrap;
  } catch (e) { notify(e.message, "error"); }
  route();
});
