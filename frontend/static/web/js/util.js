// Small shared helpers: DOM building, the API client (session + CSRF), YAML display, tabs, copy.

/** Build an element: h("a", {href: "/x", class: "y"}, "text", child). Strings become text nodes. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function bootstrap() {
  const node = document.getElementById("bootstrap");
  return node ? JSON.parse(node.textContent) : {};
}

function cookie(name) {
  for (const part of document.cookie.split(";")) {
    const [key, ...rest] = part.trim().split("=");
    if (key === name) return decodeURIComponent(rest.join("="));
  }
  return "";
}

/** An API error with the server's ``errors`` list and the HTTP status. */
export class ApiError extends Error {
  constructor(status, body) {
    const errors = (body && body.errors) || [];
    super(errors.length ? errors.map((e) => e.message).join(" ") : `HTTP ${status}`);
    this.status = status;
    this.body = body || {};
    this.errors = errors;
  }
}

/** JSON request to our own API with the session cookie and the CSRF token (never cross-origin). */
export async function api(method, path, body, headers = {}) {
  const init = { method, credentials: "same-origin", headers: { Accept: "application/json", ...headers } };
  if (method !== "GET" && method !== "HEAD") init.headers["X-CSRFToken"] = cookie("csrftoken");
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = { errors: [{ message: text.slice(0, 200) }] }; }
  if (!response.ok) throw new ApiError(response.status, data);
  return { data, response };
}

export function debounce(fn, ms) {
  let timer = null;
  const wrapped = (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
  wrapped.flush = (...args) => { clearTimeout(timer); fn(...args); };
  return wrapped;
}

const timeFormat = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });
const dateTimeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
export const fmtTime = (iso) => (iso ? timeFormat.format(new Date(iso)) : "");
export const fmtDateTime = (iso) => (iso ? dateTimeFormat.format(new Date(iso)) : "—");

export function fmtMs(ms) {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 120000) return `${(ms / 1000).toFixed(1)} s`;
  return `${(ms / 60000).toFixed(1)} min`;
}

export function toast(message) {
  const el = document.getElementById("toast");
  if (!el) return;
  el.textContent = message;
  el.classList.add("show");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => el.classList.remove("show"), 2500);
}

export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
  } catch (e) {
    // Clipboard API refused (permissions, insecure origin): fall back to a hidden textarea.
    const area = h("textarea", { "aria-hidden": "true", style: "position:fixed;left:-9999px" }, text);
    document.body.append(area);
    area.select();
    document.execCommand("copy");
    area.remove();
  }
  toast("Copied");
}

// --- YAML for display (the API returns JSON; people read YAML). Block style, quoted when needed. ---
const PLAIN = /^[A-Za-z0-9_./@][A-Za-z0-9_./@ :=+,-]*$/;
const RESERVED = /^(true|false|null|yes|no|on|off|~|-?\d[\d_.eE+-]*)$/i;

function scalar(value) {
  if (value === null || value === undefined) return "null";
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  const text = String(value);
  if (text !== "" && PLAIN.test(text) && !RESERVED.test(text) && !text.includes(": ") && !text.endsWith(":")) return text;
  return JSON.stringify(text);
}

export function toYaml(value, indent = 0) {
  const pad = "  ".repeat(indent);
  if (Array.isArray(value)) {
    if (!value.length) return `${pad}[]`;
    return value.map((item) => {
      if (item && typeof item === "object" && Object.keys(item).length) {
        const inner = toYaml(item, indent + 1).trimStart();
        return `${pad}- ${inner}`;
      }
      return `${pad}- ${item && typeof item === "object" ? (Array.isArray(item) ? "[]" : "{}") : scalar(item)}`;
    }).join("\n");
  }
  if (value && typeof value === "object") {
    const keys = Object.keys(value);
    if (!keys.length) return `${pad}{}`;
    return keys.map((key) => {
      const item = value[key];
      if (item && typeof item === "object" && (Array.isArray(item) ? item.length : Object.keys(item).length)) {
        return `${pad}${scalar(key)}:\n${toYaml(item, indent + 1)}`;
      }
      const shown = item && typeof item === "object" ? (Array.isArray(item) ? "[]" : "{}") : scalar(item);
      return `${pad}${scalar(key)}: ${shown}`;
    }).join("\n");
  }
  return pad + scalar(value);
}

/** ARIA tabs: click or arrow keys switch; ``onShow(id)`` runs when a tab is shown. */
export function setupTabs(tablist, onShow = () => {}) {
  const tabs = [...tablist.querySelectorAll('[role="tab"]')];
  const show = (tab, focus = false) => {
    for (const other of tabs) {
      const selected = other === tab;
      other.setAttribute("aria-selected", String(selected));
      other.tabIndex = selected ? 0 : -1;
      document.getElementById(other.getAttribute("aria-controls")).hidden = !selected;
    }
    if (focus) tab.focus();
    onShow(tab.id);
  };
  tablist.addEventListener("click", (event) => {
    const tab = event.target.closest('[role="tab"]');
    if (tab) show(tab);
  });
  tablist.addEventListener("keydown", (event) => {
    const index = tabs.indexOf(document.activeElement);
    if (index < 0) return;
    const moves = { ArrowRight: 1, ArrowLeft: -1, Home: -index, End: tabs.length - 1 - index };
    if (!(event.key in moves)) return;
    event.preventDefault();
    show(tabs[(index + moves[event.key] + tabs.length) % tabs.length], true);
  });
  return { show: (id) => show(tabs.find((t) => t.id === id) || tabs[0]) };
}

export function badge(text, kind = text) {
  return h("span", { class: `badge ${kind || ""}` }, text || "—");
}
