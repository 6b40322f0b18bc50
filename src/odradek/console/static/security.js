// Security: ACLs (list, create, delete) and SCRAM users (list, set a password, delete), as
// the principal the console logs in as (odradek console -X sasl.username=...).
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
  page.append(el("h1", {}, "Security"),
    el("p", {class: "muted"}, "The console acts as the principal it logs in as; the node's authorizer decides what it may see and change. Quotas: odradek quota."),
    el("h2", {}, "ACLs"), aclBox, aclForm, el("h2", {}, "SCRAM users"), userBox, userForm);
  loadAcls();
  loadUsers();
};
