// Topics: the paged, searched list with create; one topic's partitions and configs with
// alter, add partitions and delete.
"use strict";

function parseConfigLines(text) {
  const out = {};
  for (const line of text.split("\n").map(s => s.trim()).filter(Boolean)) {
    const i = line.indexOf("=");
    if (i <= 0) throw new Error(`a config line is name=value, not "${line}"`);
    out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  return out;
}

C.pages.topics = (page, name) => name ? topicDetail(page, name) : topicList(page);

function topicList(page) {
  const state = {q: "", page: 1, pages: 1, total: 0, internal: false};
  const list = el("div", {"data-testid": "topic-list"});
  const search = el("input", {type: "search", placeholder: "search topics", "data-testid": "topic-search"});
  let timer = null;
  search.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => { state.q = search.value; state.page = 1; load(); }, 250);
  });
  const internal = el("input", {type: "checkbox", onchange: () => { state.internal = internal.checked; load(); }});
  const load = async () => {
    let r;
    const qs = new URLSearchParams({q: state.q, page: state.page, size: 50, internal: state.internal ? 1 : 0});
    try { r = await api("GET", "/api/topics?" + qs); } catch (e) { notify(e.message, "error"); return; }
    Object.assign(state, {page: r.page, pages: r.pages, total: r.total});
    list.replaceChildren(
      table([{title: "Name", render: t => link("/topics/" + encodeURIComponent(t.name), t.name)},
             {title: "Partitions", key: "partitions", num: true},
             {title: "Replication", key: "replication", num: true},
             {title: "Messages", num: true, render: t => fmtNum(t.messages)},
             {title: "Size", num: true, render: t => fmtBytes(t.size_bytes)},
             {title: "Rate (msg/s)", num: true, render: t => t.rate === null ? "-" : t.rate.toFixed(1)},
             {title: "Unhealthy partitions", key: "unhealthy_partitions", num: true}], r.topics,
            {"data-testid": "topics-table"}),
      pager(state, load));
  };
  const form = el("form", {"data-testid": "create-topic"},
    el("h2", {}, "Create a topic"),
    el("label", {}, "Name", el("input", {name: "name", required: true, "data-testid": "new-topic-name"})),
    el("label", {}, "Partitions", el("input", {name: "partitions", value: "1", size: 5})),
    el("label", {}, "Replication factor (-1: default)", el("input", {name: "replication", value: "-1", size: 5})),
    el("label", {}, "Configs (name=value per line)", el("textarea", {name: "configs"})),
    el("div", {}, el("button", {type: "submit"}, "Create")));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = new FormData(form);
    await act(form.querySelector("button"), async () => {
      const out = await api("POST", "/api/topics", {name: f.get("name"), partitions: f.get("partitions"),
        replication: f.get("replication"), configs: parseConfigLines(f.get("configs"))});
      load();
      return out;
    }, out => `Created topic ${out.created} with ${out.partitions} partition(s).`);
  });
  page.append(el("h1", {}, "Topics"),
    el("div", {}, search, " ", el("label", {}, internal, " show internal topics")),
    list, form);
  load();
  every(5000, load);
}

async function topicDetail(page, name) {
  page.append(el("h1", {}, "Topic ", el("span", {"data-testid": "topic-name"}, name)),
    el("p", {}, link("/topics", "all topics"), " · ",
      link("/messages?topic=" + encodeURIComponent(name), "messages")));
  const body = el("div", {});
  page.append(body);
  const load = async () => {
    let t;
    try { t = await api("GET", "/api/topics/" + encodeURIComponent(name)); }
    catch (e) { notify(e.message, "error"); body.replaceChildren(); return; }
    const alter = el("form", {"data-testid": "alter-config"},
      el("h2", {}, "Change a config"),
      el("label", {}, "Name", el("input", {name: "key", required: true})),
      el("label", {}, "Value (empty: back to the default)", el("input", {name: "value"})),
      el("div", {}, el("button", {type: "submit"}, "Apply")));
    alter.addEventListener("submit", async (e) => {
      e.preventDefault();
      const f = new FormData(alter);
      const key = f.get("key").trim(), value = f.get("value");
      await act(alter.querySelector("button"), async () => {
        const out = await api("POST", `/api/topics/${encodeURIComponent(name)}/configs`,
          value === "" ? {delete: [key]} : {set: {[key]: value}});
        load();
        return out;
      }, value === "" ? `${key} is back to its default.` : `${key} set to ${value}.`);
    });
    const grow = el("form", {"data-testid": "add-partitions"},
      el("h2", {}, "Add partitions"),
      el("label", {}, "New partition count", el("input", {name: "total", value: String(t.partitions.length + 1), size: 5})),
      el("div", {}, el("button", {type: "submit"}, "Add")));
    grow.addEventListener("submit", async (e) => {
      e.preventDefault();
      const total = new FormData(grow).get("total");
      await act(grow.querySelector("button"), async () => {
        const out = await api("POST", `/api/topics/${encodeURIComponent(name)}/partitions`, {total});
        load();
        return out;
      }, out => `${name} now has ${out.partitions} partitions.`);
    });
    const del = el("button", {class: "danger", "data-testid": "delete-topic"}, "Delete topic");
    const sure = el("button", {class: "danger", hidden: true, "data-testid": "confirm-delete-topic"},
      `Yes, delete ${name} and its data`);
    del.addEventListener("click", () => { sure.hidden = false; });
    sure.addEventListener("click", () => act(sure, async () => {
      const out = await api("DELETE", "/api/topics/" + encodeURIComponent(name));
      go("/topics");
      return out;
    }, `Deleted topic ${name}.`));
    body.replaceChildren(
      el("h2", {}, "Partitions"),
      table([{title: "Partition", key: "partition"}, {title: "Leader", key: "leader"},
             {title: "Replicas", render: p => p.replicas.join(", ")},
             {title: "ISR", render: p => p.isr.join(", ")},
             {title: "Start offset", num: true, render: p => fmtNum(p.start)},
             {title: "End offset", num: true, render: p => fmtNum(p.end)}], t.partitions,
            {"data-testid": "partitions-table"}),
      el("h2", {}, "Configs"),
      table([{title: "Name", key: "name"}, {title: "Value", render: c => c.sensitive ? "(sensitive)" : c.value},
             {title: "Source", key: "source"}, {title: "Read-only", render: c => c.read_only ? "yes" : ""}],
            t.configs, {"data-testid": "configs-table"}),
      alter, grow, el("div", {class: "panel"}, del, sure));
  };
  await load();
}
