// Security: ACLs (list, create, delete), SCRAM users (list, set a password, delete) and client
// quotas (list, set, remove), as the principal the console logs in as
// (odradek console -X sasl.username=...).
"use strict";

C.pages.security = (page) => {
  const aclBox = el("div", {"data-testid": "acls"}), userBox = el("div", {"data-testid": "users"});
  const loadAcls = async () => {
    let r;
    try { r = await api("GET", "/api/acls"); }
    catch (e) { aclBox.replaceChildren(el("p", {class: "status-ERR", "data-testid": "acls-error"}, e.message)); return; }
    aclBox.replaceChildren(table([{title: "Principal", key: "principal"}, {title: "Host", key: "host"},
      {title: "Operation", key: "operation"}, {title: "Permission", key: "permission"},
      {title: "Resource", render: a => `${a.resource_type} ${a.resource}`}, {title: "Pattern", key: "pattern"},
      {title: "", render: a => {
        const b = el("button", {class: "secondary"}, "Delete");
        b.addEventListener("click", () => act(b, async () => {
          const out = await api("POST", "/api/acls/delete", a);
          loadAcls();
          return out;
        }, `Deleted the ACL of ${a.principal}.`));
        return b;
      }}], r.acls, {"data-testid": "acls-table"}));
  };
  const loadUsers = async () => {
    let r;
    try { r = await api("GET", "/api/users"); }
    catch (e) { userBox.replaceChildren(el("p", {class: "status-ERR", "data-testid": "users-error"}, e.message)); return; }
    userBox.replaceChildren(table([{title: "User", key: "user"},
      {title: "Mechanisms", render: u => u.mechanisms.map(m => `${m.mechanism} (${m.iterations})`).join(", ")},
      {title: "", render: u => el("span", {}, u.mechanisms.map(m => {
        const b = el("button", {class: "secondary"}, "Delete " + m.mechanism);
        b.addEventListener("click", () => act(b, async () => {
          const out = await api("DELETE", `/api/users/${encodeURIComponent(u.user)}?mechanism=${m.mechanism}`);
          loadUsers();
          return out;
        }, `Deleted ${m.mechanism} credentials of ${u.user}.`));
        return b;
      }))}], r.users, {"data-testid": "users-table"}));
  };
  const select = (name, options) => el("select", {name}, options.map(o => el("option", {value: o}, o)));
  const aclForm = el("form", {"data-testid": "acl-form"}, el("h2", {}, "Add an ACL"),
    el("label", {}, "Principal", el("input", {name: "principal", placeholder: "User:alice"})),
    el("label", {}, "Host", el("input", {name: "host", value: "*", size: 10})),
    el("label", {}, "Operation", select("operation", ["READ", "WRITE", "DESCRIBE", "CREATE", "DELETE", "ALTER",
                                                      "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALL"])),
    el("label", {}, "Permission", select("permission", ["ALLOW", "DENY"])),
    el("label", {}, "Resource type", select("resource_type", ["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID"])),
    el("label", {}, "Resource name", el("input", {name: "resource", placeholder: "name or *"})),
    el("label", {}, "Pattern", select("pattern", ["LITERAL", "PREFIXED"])),
    el("div", {}, el("button", {type: "submit"}, "Add")));
  aclForm.addEventListener("submit", e => {
    e.preventDefault();
    act(aclForm.querySelector("button"), async () => {
      const out = await api("POST", "/api/acls", Object.fromEntries(new FormData(aclForm)));
      loadAcls();
      return out;
    }, out => `Added: ${out.created}.`);
  });
  const userForm = el("form", {"data-testid": "user-form"}, el("h2", {}, "Add a user or change a password"),
    el("label", {}, "User", el("input", {name: "user"})),
    el("label", {}, "Password", el("input", {name: "password", type: "password"})),
    el("label", {}, "Mechanism", select("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])),
    el("div", {}, el("button", {type: "submit"}, "Save")));
  userForm.addEventListener("submit", e => {
    e.preventDefault();
    act(userForm.querySelector("button"), async () => {
      const out = await api("POST", "/api/users", Object.fromEntries(new FormData(userForm)));
      loadUsers();
      return out;
    }, out => `Saved the credentials of ${out.user}.`);
  });
  const [quotaBox, quotaForm, loadQuotas] = quotaSection(select);
  page.append(el("h1", {}, "Security"),
    el("p", {class: "muted"}, "The console acts as the principal it logs in as; the node's authorizer decides what it may see and change."),
    el("h2", {}, "ACLs"), aclBox, aclForm, el("h2", {}, "SCRAM users"), userBox, userForm,
    el("h2", {}, "Client quotas"), quotaBox, quotaForm);
  loadAcls();
  loadUsers();
  loadQuotas();
};

// Client quotas (DescribeClientQuotas / AlterClientQuotas): one row per entity and quota.
// An empty name is that entity type's default (<default>, as kafka-configs shows it).
function quotaSection(select) {
  const box = el("div", {"data-testid": "quotas"});
  const load = async () => {
    let r;
    try { r = await api("GET", "/api/quotas"); }
    catch (e) { box.replaceChildren(el("p", {class: "status-ERR", "data-testid": "quotas-error"}, e.message)); return; }
    if (!r.quotas.length) { box.replaceChildren(el("p", {class: "muted", "data-testid": "quotas-table"}, "No client quotas.")); return; }
    box.replaceChildren(table([{title: "Entity", key: "label"}, {title: "Quota", key: "key"},
      {title: "Value", key: "value", num: true},
      {title: "", render: q => {
        const b = el("button", {class: "secondary"}, "Remove");
        b.addEventListener("click", () => act(b, async () => {
          const out = await api("POST", "/api/quotas/remove", {entity: q.entity, key: q.key});
          load();
          return out;
        }, out => `Removed ${out.removed} of ${out.entity}.`));
        return b;
      }}], r.quotas, {"data-testid": "quotas-table"}));
  };
  const form = el("form", {"data-testid": "quota-form"}, el("h2", {}, "Set a client quota"),
    el("label", {}, "Entity type", select("type", ["user", "client-id", "ip"])),
    el("label", {}, "Name", el("input", {name: "name", placeholder: "empty: the default"})),
    el("label", {}, "With client id", el("input", {name: "client", placeholder: "optional; <default>", size: 14})),
    el("label", {}, "Quota", select("key", ["producer_byte_rate", "consumer_byte_rate", "request_percentage",
                                            "controller_mutation_rate", "connection_creation_rate"])),
    el("label", {}, "Value", el("input", {name: "value", size: 12})),
    el("div", {}, el("button", {type: "submit"}, "Set")));
  form.addEventListener("submit", e => {
    e.preventDefault();
    const f = Object.fromEntries(new FormData(form));
    const entity = [{type: f.type, name: f.name || null}];
    if (f.client) entity.push({type: "client-id", name: f.client === "<default>" ? null : f.client});
    act(form.querySelector("button"), async () => {
      const out = await api("POST", "/api/quotas", {entity, key: f.key, value: f.value});
      load();
      return out;
    }, out => `Set ${out.key} = ${out.value} for ${out.entity}.`);
  });
  return [box, form, load];
}
