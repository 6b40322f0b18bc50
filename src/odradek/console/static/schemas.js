// Schemas: the registry's subjects, versions, a diff between two versions, compatibility.
"use strict";

const LEVELS = ["NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"];

C.pages.schemas = (page, subject) => {
  if (!C.info.registry) {
    page.append(el("h1", {}, "Schemas"), el("p", {"data-testid": "no-registry"},
      "No Schema Registry is configured: start the console with --registry URL (odradek serve passes its own)."));
    return;
  }
  return subject ? schemaSubject(page, subject) : schemaList(page);
};

function levelForm(current, subject, after) {
  const sel = el("select", {name: "level", "data-testid": "compat-level"},
    LEVELS.map(l => el("option", {value: l, selected: l === current}, l)));
  const btn = el("button", {type: "submit"}, "Set");
  const form = el("form", {}, el("label", {}, subject === "_global" ? "Global compatibility" : "Compatibility", sel), btn);
  form.addEventListener("submit", e => {
    e.preventDefault();
    act(btn, async () => {
      const r = await api("PUT", `/api/schemas/${encodeURIComponent(subject)}/config`, {compatibility: sel.value});
      if (after) after();
      return r;
    }, r => `Compatibility is now ${r.compatibility}.`);
  });
  return form;
}

function schemaList(page) {
  const state = {q: "", page: 1, pages: 1, total: 0};
  const list = el("div", {});
  const search = el("input", {type: "search", placeholder: "search subjects"});
  search.addEventListener("input", () => { state.q = search.value; state.page = 1; load(); });
  const load = async () => {
    let r;
    try { r = await api("GET", "/api/schemas?" + new URLSearchParams({q: state.q, page: state.page})); }
    catch (e) { notify(e.message, "error"); return; }
    Object.assign(state, {page: r.page, pages: r.pages, total: r.total});
    list.replaceChildren(levelForm(r.global_compatibility, "_global"),
      table([{title: "Subject", render: s => link("/schemas/" + encodeURIComponent(s.name), s.name)}],
            r.subjects.map(name => ({name})), {"data-testid": "subjects-table"}),
      pager(state, load));
  };
  page.append(el("h1", {}, "Schemas"), search, list);
  load();
}

async function schemaSubject(page, subject) {
  const enc = encodeURIComponent(subject);
  page.append(el("h1", {}, "Subject ", el("span", {"data-testid": "subject-name"}, subject)),
              el("p", {}, link("/schemas", "all subjects")));
  const body = el("div", {});
  page.append(body);
  let s;
  try { s = await api("GET", "/api/schemas/" + enc); } catch (e) { notify(e.message, "error"); return; }
  const shown = el("pre", {class: "panel", "data-testid": "schema-text"}, s.latest.pretty);
  const pick = el("select", {}, s.versions.map(v => el("option", {value: v, selected: v === s.latest.version}, "version " + v)));
  pick.addEventListener("change", async () => {
    try { shown.textContent = (await api("GET", `/api/schemas/${enc}/versions/${pick.value}`)).pretty; }
    catch (e) { notify(e.message, "error"); }
  });
  const from = el("select", {"data-testid": "diff-from"}, s.versions.map(v => el("option", {value: v}, v)));
  const to = el("select", {"data-testid": "diff-to"}, s.versions.map(v => el("option", {value: v, selected: v === s.latest.version}, v)));
  const diffOut = el("pre", {class: "panel diff", "data-testid": "diff"});
  const diffBtn = el("button", {type: "button"}, "Diff");
  diffBtn.addEventListener("click", () => act(diffBtn, async () => {
    const d = await api("GET", `/api/schemas/${enc}/diff?` + new URLSearchParams({from: from.value, to: to.value}));
    diffOut.replaceChildren(...(d.diff ? d.diff.split("\n") : ["(no difference)"]).map(line =>
      el("div", {class: line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : null}, line)));
    return d;
  }, d => `Diff of versions ${d.from} and ${d.to}.`));
  body.replaceChildren(
    el("p", {}, `${s.versions.length} version(s); latest ${s.latest.version}, id ${s.latest.id}, `,
      el("span", {class: "badge"}, s.latest.schemaType || "AVRO")),
    levelForm(s.compatibility, subject),
    el("div", {}, pick), shown,
    el("h2", {}, "Diff"), el("div", {}, "from ", from, " to ", to, " ", diffBtn), diffOut);
}
