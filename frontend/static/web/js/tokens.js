// API tokens: create (the key is shown once, with a copy button), list and revoke.
import { api, copyText, fmtDateTime, h, toast } from "./util.js";

const tbody = document.querySelector("#tokens-table tbody");
const form = document.getElementById("token-form");
const shown = document.getElementById("new-token");

async function load() {
  const { data } = await api("GET", "/api/v1/tokens/?limit=500");
  const tokens = data.results || data;
  tbody.replaceChildren(...tokens.map((t) => h("tr", { dataset: { token: t.id } },
    h("th", { scope: "row" }, t.name), h("td", { class: "mono" }, `${t.prefix}…`),
    h("td", {}, fmtDateTime(t.created_at)), h("td", {}, t.last_used_at ? fmtDateTime(t.last_used_at) : "never"),
    h("td", {}, t.expires_at ? fmtDateTime(t.expires_at) : "never"),
    h("td", {}, t.active ? "active" : t.revoked_at ? "revoked" : "expired"),
    h("td", {}, t.active ? h("button", { type: "button", class: "small danger", onclick: () => revoke(t) }, `Revoke ${t.name}`) : null))));
  if (!tokens.length) tbody.append(h("tr", {}, h("td", { colspan: 7, class: "empty" }, "No tokens yet.")));
  document.body.dataset.ready = "true";
}

async function revoke(token) {
  if (!window.confirm(`Revoke token ${token.name}? Programs using it stop working at once.`)) return;
  try {
    await api("DELETE", `/api/v1/tokens/${token.id}/`);
    toast(`Revoked ${token.name}`);
  } catch (e) { toast(`Not revoked: ${e.message}`); }
  load();
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const body = { name: form.elements.name.value.trim() };
  const days = form.elements.expires_in_days.value.trim();
  if (days) body.expires_in_days = Number(days);
  const errors = document.getElementById("issues-t-name");
  errors.replaceChildren();
  try {
    const { data } = await api("POST", "/api/v1/tokens/", body);
    const copy = h("button", { type: "button", class: "primary", onclick: () => copyText(data.key) }, "Copy key");
    shown.replaceChildren(h("div", { class: "secret", role: "alert" },
      h("div", {}, h("strong", {}, `Token ${data.name} created. Copy the key now: it is not shown again.`),
        h("div", {}, h("code", { id: "new-token-key" }, data.key))), copy));
    copy.focus();
    form.reset();
    load();
  } catch (e) {
    errors.replaceChildren(...(e.errors.length ? e.errors : [{ message: e.message }]).map((x) => h("p", { class: "issue error" }, x.message)));
  }
});
load();
