// The console: sign-in, routes, pages. Every action is a call to the
// node's admin or compliance API with the signed-in person's bearer token
// (api); the token lives in this module's memory only.
import { h, add, clear, field } from "./dom.js";
import { t, setLang, getLang, fmtDate } from "./i18n.js";
import * as tl from "./tlog.js";

const IDLE_MINUTES = 15;
const state = { token: "", claims: null, lastActive: Date.now(), notice: "" };

class APIError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

// api calls the node through the console's origin. The token goes in
// Authorization, never in a cookie; nothing is cached or followed.
async function api(method, path, body, accept) {
  const headers = { Authorization: "Bearer " + state.token };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (accept) headers.Accept = accept;
  const r = await fetch(path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store", credentials: "omit", redirect: "error", referrerPolicy: "no-referrer",
  });
  const ct = r.headers.get("Content-Type") || "";
  if (!r.ok) {
    let msg = "HTTP " + r.status;
    try { const j = await r.json(); if (j && j.error && j.error.message) msg = j.error.message; } catch { /* not JSON */ }
    if (r.status === 401 && state.token) { signOut(t("badToken", msg)); }
    throw new APIError(r.status, msg);
  }
  if (ct.startsWith("application/json")) return r.json();
  if (ct.startsWith("application/x-ndjson")) {
    return (await r.text()).split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l));
  }
  return r.text();
}

// claimsOf reads the token's claims for display and navigation only: the
// node checks the token on every call.
function claimsOf(token) {
  try {
    const p = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const c = JSON.parse(new TextDecoder().decode(tl.b64decode(p + "=".repeat((4 - (p.length % 4)) % 4))));
    const scopes = Array.isArray(c.scopes) ? c.scopes : Array.isArray(c.scope) ? c.scope : typeof c.scope === "string" ? c.scope.split(" ") : [];
    return { sub: String(c.sub ?? ""), tenant: String(c.tenant ?? ""), scopes: scopes.map(String).filter(Boolean) };
  } catch {
    return { sub: "", tenant: "", scopes: [] };
  }
}

const has = (s) => state.claims && state.claims.scopes.includes(s);
const isOfficer = () => has("admin") && has("compliance:read");

const routes = [
  { id: "register", nav: "navRegister", show: isOfficer, render: pageRegister },
  { id: "incident", show: () => has("compliance:read"), render: pageIncident },
  { id: "log", nav: "navLog", show: isOfficer, render: pageLog },
  { id: "tenants", nav: "navTenants", show: () => has("admin"), render: pageTenants },
  { id: "tenant", show: () => has("admin"), render: pageTenant },
  { id: "keys", nav: "navKeys", show: () => has("admin"), render: pageKeys },
  { id: "policy", nav: "navPolicy", show: () => has("admin"), render: pagePolicy },
  { id: "mine", nav: "navMine", show: () => has("compliance:read") && !has("admin"), render: pageMine },
  { id: "node", nav: "navNode", show: () => true, render: pageNode },
];

function announce(msg) {
  const live = document.getElementById("live");
  live.textContent = "";
  setTimeout(() => { live.textContent = msg; }, 50);
}

function errorBox(err) {
  return h("p", { class: "error", role: "alert" }, t("error", err && err.message ? err.message : String(err)));
}

function chrome() {
  document.title = t("title");
  document.getElementById("skip").textContent = t("skip");
  const lang = document.getElementById("lang");
  lang.textContent = t("switchTo");
  lang.lang = getLang() === "fr" ? "en" : "fr";
  const so = document.getElementById("signout");
  so.textContent = t("signOut");
  so.hidden = !state.token;
  const nav = clear(document.getElementById("nav"));
  nav.setAttribute("aria-label", t("sections"));
  const who = clear(document.getElementById("who"));
  if (!state.token) return;
  const cur = currentRoute().id;
  for (const r of routes) {
    if (!r.nav || !r.show()) continue;
    nav.append(h("a", { href: "#/" + r.id, "aria-current": cur === r.id || (cur === "incident" && r.id === "register") || (cur === "tenant" && r.id === "tenants") ? "page" : null }, t(r.nav)));
  }
  add(who, t("signedInAs", state.claims.sub, state.claims.tenant, state.claims.scopes.join(", ")));
}

function currentRoute() {
  const m = /^#\/([a-z]+)(?:\/(.*))?$/.exec(location.hash);
  const r = m && routes.find((x) => x.id === m[1] && x.show());
  if (r) return { id: r.id, route: r, arg: m[2] ? decodeURIComponent(m[2]) : "" };
  const def = routes.find((x) => x.nav && x.show());
  return { id: def.id, route: def, arg: "" };
}

async function render() {
  chrome();
  const main = clear(document.getElementById("main"));
  if (!state.token) { pageSignIn(main); return; }
  const cur = currentRoute();
  if (state.notice) { main.append(h("p", { class: "ok", role: "status" }, state.notice)); state.notice = ""; }
  const body = h("div", { "aria-busy": "true" }, h("p", { class: "muted" }, t("loading")));
  main.append(body);
  try {
    const out = h("div");
    await cur.route.render(out, cur.arg);
    clear(body).append(out);
  } catch (err) {
    clear(body).append(errorBox(err));
  }
  body.removeAttribute("aria-busy");
}

function signOut(msg) {
  state.token = "";
  state.claims = null;
  state.notice = "";
  history.replaceState(null, "", "#/");
  render().then(() => { if (msg) { document.getElementById("main").prepend(h("p", { class: "error", role: "alert" }, msg)); } });
}

// ---- sign-in ---------------------------------------------------------------

let config = {}; // GET /config.json: {oidc?: {authorize_url, token_url, client_id, scope}}

const b64url = (bytes) => btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
const redirectURI = () => location.origin + "/";

// oidcStart sends the browser to the provider (authorization code + PKCE,
// S256). The verifier and state wait for the return in session storage, the
// only thing the console ever stores, removed as soon as it is read; the
// token itself never is.
async function oidcStart() {
  const o = config.oidc;
  const verifier = b64url(crypto.getRandomValues(new Uint8Array(32)));
  const st = b64url(crypto.getRandomValues(new Uint8Array(16)));
  const challenge = b64url(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier))));
  sessionStorage.setItem("cloison.pkce", JSON.stringify({ verifier, state: st })); // cloison.pkce: one sign-in's verifier
  const q = new URLSearchParams({ response_type: "code", client_id: o.client_id, redirect_uri: redirectURI(), scope: o.scope || "openid",
    state: st, code_challenge: challenge, code_challenge_method: "S256" });
  location.assign(o.authorize_url + (o.authorize_url.includes("?") ? "&" : "?") + q.toString());
}

// oidcReturn completes a sign-in the provider sent back here: the state
// must be the one this tab sent, the code is exchanged with the verifier.
// Returns the token, or throws; the code leaves the address bar either way.
async function oidcReturn(params) {
  const saved = sessionStorage.getItem("cloison.pkce"); // cloison.pkce: read once
  sessionStorage.removeItem("cloison.pkce"); // cloison.pkce: and removed
  history.replaceState(null, "", "/#/");
  if (params.get("error")) throw new Error(params.get("error"));
  const p = saved ? JSON.parse(saved) : null;
  if (!p || !config.oidc || p.state !== params.get("state")) throw new Error(t("oidcState"));
  const r = await fetch(config.oidc.token_url, {
    method: "POST", headers: { "Content-Type": "application/x-www-form-urlencoded" }, credentials: "omit", cache: "no-store", redirect: "error",
    body: new URLSearchParams({ grant_type: "authorization_code", code: params.get("code"), redirect_uri: redirectURI(),
      client_id: config.oidc.client_id, code_verifier: p.verifier }).toString(),
  });
  const j = await r.json().catch(() => ({}));
  if (!r.ok || typeof j.access_token !== "string") throw new Error(j.error_description || j.error || "HTTP " + r.status);
  return j.access_token;
}

// acceptToken checks tok with the node before anything is shown, then
// keeps it (memory only) and opens the first page the scopes allow.
async function acceptToken(tok) {
  state.token = tok;
  try {
    await api("GET", "/v1/attestation"); // any valid token
  } catch (ex) {
    state.token = "";
    throw ex;
  }
  state.claims = claimsOf(tok);
  state.lastActive = Date.now();
  const def = routes.find((x) => x.nav && x.show());
  if (location.hash === "#/" + def.id) await render(); else location.hash = "#/" + def.id;
  document.getElementById("main").focus();
}

function pageSignIn(main) {
  const err = h("div");
  const [lbl, input] = field(t("token"), (id) => h("input", { id, type: "password", autocomplete: "off", spellcheck: "false", required: true, name: "token" }));
  const form = h("form", { class: "grid card", "aria-labelledby": "signin-h" },
    h("p", { class: "full" }, t("signInHelp")), lbl, input, h("div", { class: "full" }, h("button", { type: "submit" }, t("signIn"))));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clear(err);
    const tok = input.value.trim();
    input.value = "";
    try {
      await acceptToken(tok);
    } catch (ex) {
      err.append(h("p", { class: "error", role: "alert" }, t("badToken", ex.message)));
    }
  });
  main.append(h("h1", { id: "signin-h" }, t("signInTitle")), err);
  if (config.oidc) {
    main.append(h("div", { class: "card" }, h("button", { type: "button", id: "oidc", onclick: () => { oidcStart().catch((ex) => err.append(errorBox(ex))); } }, t("oidcSignIn"))),
      h("p", { class: "muted" }, t("orToken")));
  }
  main.append(form);
  input.focus();
}

// ---- helpers ----------------------------------------------------------------

function period(p) {
  if (!p || !p.start) return "";
  return p.start + (p.end ? " – " + p.end : "") + (p.approximate ? " ~" : "");
}

function deadlineCell(dls) {
  if (!dls || dls.length === 0) return t("none");
  return h("ul", { class: "plain" }, dls.map((d) => {
    const late = d.status === "overdue" || d.status === "sent_late";
    return h("li", { class: late ? "late" : d.status === "sent_on_time" ? "ok" : null },
      late ? h("span", { class: "badge" }, t("lateMark")) : null, late ? " " : null,
      d.tenant, " : ", t("dl_" + d.status), d.due_at ? " · " + t("due", fmtDate(d.due_at)) : "");
  }));
}

function table(headers, rows, caption) {
  return h("table", {}, caption ? h("caption", { class: "sr-only" }, caption) : null,
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, rows));
}

function submitting(form, fn) {
  const status = h("div", { role: "status" });
  form.append(status);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clear(status);
    const btn = form.querySelector("button[type=submit]");
    btn.disabled = true;
    try {
      const msg = await fn();
      if (msg) { state.notice = msg; announce(msg); await render(); }
    } catch (err) {
      status.append(errorBox(err));
    } finally {
      btn.disabled = false;
    }
  });
  return form;
}

// ---- register --------------------------------------------------------------

async function pageRegister(out) {
  const data = await api("GET", "/compliance/v1/incidents");
  out.append(h("h1", {}, t("registerTitle")));
  const rc = data.register_check || {};
  out.append(h("p", { class: rc.ok ? "ok" : "late", role: "status" }, t("registerCheck"), " : ",
    rc.ok ? t("registerOk") : t("registerBad", rc.failures ?? "?")));
  const rows = (data.incidents || []).map((f) => {
    const v = f.Versions[f.Versions.length - 1];
    return h("tr", {},
      h("td", {}, h("a", { href: "#/incident/" + encodeURIComponent(f.ID) }, f.ID)),
      h("td", {}, t("st_" + v.status)),
      h("td", {}, t("as_" + (v.assessment && v.assessment.status))),
      h("td", {}, period(v.awareness)),
      h("td", {}, String(v.persons_concerned)),
      h("td", {}, (v.affected_tenants || []).join(", ")),
      h("td", {}, deadlineCell(f.NoticeDeadlines)));
  });
  out.append(table([t("incident"), t("status"), t("assessment"), t("awareness"), t("persons"), t("tenants"), t("deadlines")], rows, t("registerTitle")));
  if (has("compliance:write")) out.append(openIncidentForm());
  if (has("admin")) out.append(exportForm());
  out.append(await organisationForm());
}

// apiBlob is api for a file: the answer's bytes and headers.
async function apiBlob(method, path, body, headers) {
  const r = await fetch(path, {
    method, headers: { Authorization: "Bearer " + state.token, ...(headers || {}) }, body,
    cache: "no-store", credentials: "omit", redirect: "error", referrerPolicy: "no-referrer",
  });
  if (!r.ok) {
    let msg = "HTTP " + r.status;
    try { const j = await r.json(); if (j && j.error && j.error.message) msg = j.error.message; } catch { /* not JSON */ }
    if (r.status === 401 && state.token) { signOut(t("badToken", msg)); }
    throw new APIError(r.status, msg);
  }
  return { blob: await r.blob(), headers: r.headers };
}

// exportForm: a signed export (GET /compliance/v1/export, ledgered) in the
// format chosen, offered for download (a link to its bytes), and the node's verification of the
// very bytes downloaded (POST /compliance/v1/export/verify) shown in words.
function exportForm() {
  const [l1, fmt] = field(t("exportFormat"), (fid) => h("select", { id: fid },
    ["pdf", "csv", "jsonl", "zip"].map((f) => h("option", { value: f }, t("fmt_" + f)))));
  const out = h("div", { "aria-live": "polite" });
  const form = h("form", { class: "grid card", "aria-labelledby": "exp-h" }, h("h2", { id: "exp-h", class: "full" }, t("exportTitle")),
    h("p", { class: "full muted" }, t("exportHelp")), l1, fmt,
    h("div", { class: "full" }, h("button", { type: "submit" }, t("exportDo"))), h("div", { class: "full" }, out));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clear(out);
    const btn = form.querySelector("button[type=submit]");
    btn.disabled = true;
    try {
      const f = fmt.value;
      const { blob, headers } = await apiBlob("GET", "/compliance/v1/export?format=" + encodeURIComponent(f));
      const name = "cloison-export." + f;
      const a = document.createElement("a");
      a.href = URL.createObjectURL(blob);
      a.download = name;
      a.id = "export-download";
      a.textContent = t("exportDownload", name, blob.size);
      out.append(h("p", {}, a));
      const mh = headers.get("Cloison-Export-Manifest");
      const vh = f === "zip" || !mh ? { "Content-Type": "application/zip" } : { "Content-Type": "application/octet-stream", "Cloison-Export-Manifest": mh };
      const v = JSON.parse(await (await apiBlob("POST", "/compliance/v1/export/verify", blob, vh)).blob.text());
      out.append(h("p", { class: v.ok ? "ok" : "late", role: "status", id: "export-verdict" }, v.ok ? t("exportOk") : t("exportBad"), " ", v.result));
    } catch (err) {
      out.append(errorBox(err));
    } finally {
      btn.disabled = false;
    }
  });
  return form;
}

// organisationForm: the organisation and privacy officer new register
// entries name (Règlement s. 3(1), 3(2)); saving is a new settings version.
async function organisationForm() {
  const set = await api("GET", "/admin/v1/register/organisation");
  const o = set.organization || {}, c = set.contact || {};
  const mk = (label, v) => field(label, (fid) => h("input", { id: fid, type: "text", value: v || "" }));
  const [l1, name] = mk(t("orgName"), o.name), [l2, neq] = mk(t("orgNEQ"), o.neq);
  const [l3, cn] = mk(t("contactName"), c.name), [l4, ct] = mk(t("contactTitle"), c.title);
  const [l5, cp] = mk(t("contactPhone"), c.phone), [l6, ce] = mk(t("contactEmail"), c.email);
  const form = h("form", { class: "grid card", "aria-labelledby": "org-h" }, h("h2", { id: "org-h", class: "full" }, t("orgTitle")),
    h("p", { class: "full muted" }, t("orgVersion", set.version)), l1, name, l2, neq, l3, cn, l4, ct, l5, cp, l6, ce,
    h("div", { class: "full" }, h("button", { type: "submit" }, t("save"))));
  return submitting(form, async () => {
    const r = await api("PUT", "/admin/v1/register/organisation", { organization: { name: name.value, neq: neq.value },
      contact: { name: cn.value, title: ct.value, phone: cp.value, email: ce.value } });
    return t("orgSaved", r.version);
  });
}

function openIncidentForm() {
  const today = new Date().toISOString().slice(0, 10);
  const [l1, circ] = field(t("circumstances"), (id) => h("textarea", { id, required: true }));
  const [l2, pinfo] = field(t("personalInfo"), (id) => h("textarea", { id, required: true }));
  const [l3, occ] = field(t("occurredDate"), (id) => h("input", { id, type: "date", required: true, value: today }));
  const [l4, aw] = field(t("awarenessDate"), (id) => h("input", { id, type: "date", required: true, value: today }));
  const [l5, pers] = field(t("personsCount"), (id) => h("input", { id, type: "number", min: "0", required: true, value: "0" }));
  const [l6, ten] = field(t("affectedTenants"), (id) => h("input", { id, type: "text" }));
  const form = h("form", { class: "grid card", "aria-labelledby": "open-h" },
    h("h2", { id: "open-h", class: "full" }, t("openIncident")), l1, circ, l2, pinfo, l3, occ, l4, aw, l5, pers, l6, ten,
    h("div", { class: "full" }, h("button", { type: "submit" }, t("open"))));
  return submitting(form, async () => {
    const st = await api("POST", "/compliance/v1/incidents", {
      status: "open", assessment: { status: "pending" },
      circumstances: circ.value, personal_info: pinfo.value,
      occurred: { start: occ.value }, awareness: { start: aw.value },
      persons_concerned: Number(pers.value),
      affected_tenants: ten.value.split(",").map((s) => s.trim()).filter(Boolean),
    });
    return t("opened", st.incident);
  });
}

const versionFields = [
  ["status", (v) => t("st_" + v.status)],
  ["circumstances", (v) => v.circumstances],
  ["personal_info", (v) => v.personal_info || v.personal_info_undescribed || ""],
  ["occurred", (v) => period(v.occurred)],
  ["awareness", (v) => period(v.awareness)],
  ["persons_concerned", (v) => String(v.persons_concerned)],
  ["assessment", (v) => {
    const a = v.assessment || {};
    const risk = a.risk_of_serious_injury === true ? t("riskYes") : a.risk_of_serious_injury === false ? t("riskNo") : "";
    return [t("as_" + a.status), risk, a.sensitivity, a.likelihood, a.completed_on].filter(Boolean).join(" · ");
  }],
  ["affected_tenants", (v) => (v.affected_tenants || []).join(", ") + (v.other_tenants ? " + " + t("otherCount", v.other_tenants) : "")],
  ["measures_taken", (v) => (v.measures_taken || []).map((m) => (m.date ? m.date + " : " : "") + m.what).join("; ")],
  ["measures_planned", (v) => (v.measures_planned || []).map((m) => (m.date ? m.date + " : " : "") + m.what).join("; ")],
  ["cause", (v) => v.cause || ""],
  ["deferral", (v) => (v.persons_notice_deferral ? v.persons_notice_deferral.reason + (v.persons_notice_deferral.until ? " → " + v.persons_notice_deferral.until : "") : "")],
  ["consulted", (v) => (v.privacy_officer_consulted ? v.privacy_officer_consulted.who + " · " + v.privacy_officer_consulted.date : "")],
  ["recorded", (v) => fmtDate(v.RecordedAt) + " · " + (v.RecordedBy || "")],
];

async function pageIncident(out, id) {
  const data = await api("GET", "/compliance/v1/incidents/" + encodeURIComponent(id));
  const f = data.incident || data;
  const latest = f.Versions[f.Versions.length - 1];
  out.append(h("h1", {}, t("incident"), " ", f.ID));
  out.append(h("dl", { class: "kv" },
    h("dt", {}, t("status")), h("dd", {}, t("st_" + latest.status)),
    h("dt", {}, t("deadlines")), h("dd", {}, deadlineCell(f.NoticeDeadlines))));
  // Versions side by side, what changed from the previous one marked.
  out.append(h("h2", {}, t("versions")));
  const rows = versionFields.map(([name, get]) => h("tr", {}, h("th", { scope: "row" }, t("vf_" + name)),
    f.Versions.map((v, i) => {
      const val = get(v);
      const changed = i > 0 && get(f.Versions[i - 1]) !== val;
      return h("td", { class: changed ? "changed" : null }, val, changed ? h("span", { class: "sr-only" }, " " + t("changedMark")) : null);
    })));
  out.append(h("div", { class: "scroll" }, table([t("field"), ...f.Versions.map((v) => t("version", v.version))], rows, t("versions"))));
  // Notices.
  out.append(h("h2", {}, t("notices")));
  const ns = f.Notices || [];
  out.append(ns.length === 0 ? h("p", { class: "muted" }, t("none")) : table(
    ["#", t("recipient"), t("recipientName"), t("method"), t("sentAt"), t("digest"), t("noticeText")],
    ns.map((n) => h("tr", {}, h("td", {}, String(n.Number)), h("td", {}, t("rc_" + n.Recipient) + (n.Tenant ? " · " + n.Tenant : "")),
      h("td", {}, n.RecipientName || ""), h("td", {}, n.Method || ""), h("td", {}, fmtDate(n.SentAt)),
      h("td", {}, h("code", {}, (n.ContentDigest || "").slice(0, 16) + "…")), h("td", {}, h("pre", {}, n.Text || ""))))));
  if (has("compliance:write") && has("admin")) {
    out.append(noticeForm(f.ID, latest.affected_tenants || []));
    if (latest.status !== "closed") {
      out.append(measureForm(f.ID, latest), assessmentForm(f.ID), deferralForm(f.ID));
      const form = h("form", { class: "row" }, h("button", { type: "submit", class: "secondary" }, t("closeIncident")));
      out.append(submitting(form, async () => {
        const st = await api("PATCH", "/compliance/v1/incidents/" + encodeURIComponent(f.ID), { status: "closed" });
        return t("closed", st.version);
      }));
    }
  }
  // Drafts, French first, shown as text.
  out.append(h("h2", {}, t("drafts")));
  const draftOut = h("pre", { id: "draft", "aria-live": "polite", hidden: true });
  const draftErr = h("div");
  const buttons = h("div", { class: "row" });
  const kinds = has("admin") ? [["cai", "", t("draftCAI")], ["persons", "", t("draftPersons")], ...(latest.affected_tenants || []).map((x) => ["client", x, t("draftClient", x)])]
    : [["client", "", t("draftClient", state.claims.tenant)]];
  for (const [kind, tenant, label] of kinds) {
    buttons.append(h("button", { type: "button", class: "secondary", onclick: async () => {
      clear(draftErr);
      try {
        const q = tenant ? "?tenant=" + encodeURIComponent(tenant) : "";
        draftOut.textContent = await api("GET", "/compliance/v1/incidents/" + encodeURIComponent(f.ID) + "/drafts/" + kind + q);
        draftOut.hidden = false;
      } catch (err) { draftErr.append(errorBox(err)); }
    } }, label));
  }
  out.append(buttons, draftErr, draftOut);
}

// assessmentForm completes the serious-injury assessment (s. 7(6), art.
// 3.7: the privacy officer's consultation recorded with it): a new version.
function assessmentForm(id) {
  const today = new Date().toISOString().slice(0, 10);
  const [l1, sens] = field(t("sensitivity"), (fid) => h("input", { id: fid, type: "text", required: true }));
  const [l2, mal] = field(t("maliciousUses"), (fid) => h("input", { id: fid, type: "text", required: true }));
  const [l3, cons] = field(t("consequences"), (fid) => h("input", { id: fid, type: "text", required: true }));
  const [l4, lik] = field(t("likelihood"), (fid) => h("input", { id: fid, type: "text", required: true }));
  const [l5, risk] = field(t("risk"), (fid) => h("select", { id: fid }, h("option", { value: "yes" }, t("yes")), h("option", { value: "no" }, t("no"))));
  const [l6, who] = field(t("consultedWho"), (fid) => h("input", { id: fid, type: "text", required: true }));
  const [l7, on] = field(t("completedOn"), (fid) => h("input", { id: fid, type: "date", required: true, value: today }));
  const form = h("form", { class: "grid card", "aria-labelledby": "assess-h" }, h("h2", { id: "assess-h", class: "full" }, t("completeAssessment")),
    l1, sens, l2, mal, l3, cons, l4, lik, l5, risk, l6, who, l7, on, h("div", { class: "full" }, h("button", { type: "submit" }, t("record"))));
  return submitting(form, async () => {
    const consulted = { who: who.value, date: on.value };
    const st = await api("PATCH", "/compliance/v1/incidents/" + encodeURIComponent(id), {
      assessment: { status: "completed", sensitivity: sens.value, malicious_uses: mal.value, consequences: cons.value, likelihood: lik.value,
        risk_of_serious_injury: risk.value === "yes", completed_on: on.value, consulted: [consulted] },
      privacy_officer_consulted: consulted,
    });
    return t("versionRecorded", st.version);
  });
}

// measureForm adds a measure taken (s. 7(8)) or planned (s. 3(10)) to the
// latest version's: a new version with the list extended.
function measureForm(id, latest) {
  const today = new Date().toISOString().slice(0, 10);
  const [l1, kind] = field(t("measureKind"), (fid) => h("select", { id: fid },
    h("option", { value: "measures_taken" }, t("vf_measures_taken")), h("option", { value: "measures_planned" }, t("vf_measures_planned"))));
  const [l2, what] = field(t("measureWhat"), (fid) => h("input", { id: fid, type: "text", required: true }));
  const [l3, on] = field(t("measureDate"), (fid) => h("input", { id: fid, type: "date", required: true, value: today }));
  const form = h("form", { class: "grid card", "aria-labelledby": "measure-h" }, h("h2", { id: "measure-h", class: "full" }, t("addMeasure")),
    l1, kind, l2, what, l3, on, h("div", { class: "full" }, h("button", { type: "submit" }, t("record"))));
  return submitting(form, async () => {
    const list = [...(latest[kind.value] || []), { what: what.value, date: on.value }];
    const st = await api("PATCH", "/compliance/v1/incidents/" + encodeURIComponent(id), { [kind.value]: list });
    return t("versionRecorded", st.version);
  });
}

// deferralForm defers the notice to persons for an investigation (Act s.
// 3.5 para. 3): a new version.
function deferralForm(id) {
  const [l1, reason] = field(t("deferralReason"), (fid) => h("textarea", { id: fid, required: true }));
  const [l2, until] = field(t("deferralUntil"), (fid) => h("input", { id: fid, type: "date" }));
  const form = h("form", { class: "grid card", "aria-labelledby": "defer-h" }, h("h2", { id: "defer-h", class: "full" }, t("deferNotice")),
    l1, reason, l2, until, h("div", { class: "full" }, h("button", { type: "submit" }, t("record"))));
  return submitting(form, async () => {
    const d = { reason: reason.value };
    if (until.value) d.until = until.value;
    const st = await api("PATCH", "/compliance/v1/incidents/" + encodeURIComponent(id), { persons_notice_deferral: d });
    return t("versionRecorded", st.version);
  });
}

function noticeForm(id, tenants) {
  const [l1, rc] = field(t("recipient"), (fid) => h("select", { id: fid },
    ["tenant", "cai", "persons", "public", "foreign_authority"].map((k) => h("option", { value: k }, t("rc_" + k)))));
  const [l2, ten] = field(t("tenantId"), (fid) => h("input", { id: fid, type: "text", value: tenants[0] || "" }));
  const [l3, rn] = field(t("recipientName"), (fid) => h("input", { id: fid, type: "text" }));
  const [l4, me] = field(t("method"), (fid) => h("input", { id: fid, type: "text", required: true, value: "courriel" }));
  const now = new Date(Date.now() - new Date().getTimezoneOffset() * 60000).toISOString().slice(0, 16);
  const [l5, at] = field(t("sentAt"), (fid) => h("input", { id: fid, type: "datetime-local", required: true, value: now }));
  const [l6, tx] = field(t("noticeText"), (fid) => h("textarea", { id: fid }));
  const form = h("form", { class: "grid card", "aria-labelledby": "notice-h" },
    h("h2", { id: "notice-h", class: "full" }, t("addNotice")), l1, rc, l2, ten, l3, rn, l4, me, l5, at, l6, tx,
    h("div", { class: "full" }, h("button", { type: "submit" }, t("record"))));
  return submitting(form, async () => {
    const body = { Recipient: rc.value, RecipientName: rn.value, Method: me.value, SentAt: new Date(at.value).toISOString() };
    if (rc.value === "tenant") body.Tenant = ten.value.trim();
    if (tx.value !== "") { body.Text = tx.value; body.ContentDigest = await tl.sha256Hex(tx.value); }
    const st = await api("POST", "/compliance/v1/incidents/" + encodeURIComponent(id) + "/notices", body);
    return t("noticeRecorded", st.Number, String(st.ContentDigest || "").slice(0, 16) + "…");
  });
}

// ---- transparency log ------------------------------------------------------

// checkTenantEntry fetches tenant's signed checkpoint and the inclusion
// proof of position pos, and checks both here: the signature with the
// tenant log's key derived from vkey, the Merkle path from the entry's
// canonical payload to the signed root. Returns {ok, lines, payload}.
async function checkTenantEntry(vkey, tenant, pos) {
  const lines = [];
  const { name, pub } = tl.parseVerifierKey(vkey);
  const tname = name + "/tenant/" + tenant;
  lines.push(t("stepKey", tname));
  const q = "?tenant=" + encodeURIComponent(tenant);
  const cp = await api("GET", "/compliance/v1/tlog/tenant/checkpoint" + q, undefined, "application/json");
  const note = tl.parseNote(cp.checkpoint);
  if (note.origin !== tname) throw new Error("origin " + note.origin + " ≠ " + tname);
  const sig = await tl.verifyNote(note, tname, pub);
  let ok = true;
  if (sig.ok) lines.push(t("sigOk"));
  else if (sig.reason === "no-ed25519") lines.push(t("sigNoEd"));
  else { ok = false; lines.push(sig.reason === "no-signature" ? t("sigMissing") : t("sigBad")); }
  const pr = await api("GET", "/compliance/v1/tlog/tenant/inclusion" + q + "&seq=" + pos + "&tree_size=" + note.size, undefined, "application/json");
  const leaf = await tl.leafHash(tl.canonical(pr.payload));
  lines.push(t("stepLeaf", tl.hex(leaf)));
  const inc = await tl.verifyInclusion(leaf, BigInt(pos) - 1n, note.size, pr.proof.map(tl.b64decode), note.root);
  lines.push(inc ? t("incOk", pos, tenant, String(note.size)) : t("incBad"));
  return { ok: ok && inc, lines, payload: pr.payload };
}

function resultBox(res) {
  return h("div", { class: res.ok ? "ok card" : "late card", role: "status" }, h("ul", { class: "steps" }, res.lines.map((l) => h("li", {}, l))));
}

async function pageLog(out) {
  out.append(h("h1", {}, t("logTitle")));
  const vkey = (await api("GET", "/compliance/v1/tlog/key")).trim();
  const [lk, keyIn] = field(t("verifierKey"), (id) => h("input", { id, type: "text", value: vkey, spellcheck: "false" }));
  out.append(h("div", { class: "grid card" }, lk, keyIn));
  // Checkpoint, optionally the latest one cosigned by k witnesses.
  const [lwk, wkeys] = field(t("witnessKeys"), (id) => h("textarea", { id, spellcheck: "false" }));
  out.append(h("div", { class: "grid card" }, lwk, wkeys));
  const [lw, wit] = field(t("witnesses"), (id) => h("select", { id }, [0, 1, 2, 3].map((k) => h("option", { value: String(k) }, String(k)))));
  const cpOut = h("div");
  const showCheckpoint = async () => {
    clear(cpOut);
    try {
      const k = Number(wit.value);
      const cp = await api("GET", "/compliance/v1/tlog/checkpoint" + (k > 0 ? "?witnesses=" + k : ""), undefined, "application/json");
      const note = tl.parseNote(cp.checkpoint);
      const { name, pub } = tl.parseVerifierKey(keyIn.value);
      const sig = await tl.verifyNote(note, name, pub);
      cpOut.append(h("dl", { class: "kv" },
        h("dt", {}, t("origin")), h("dd", {}, note.origin),
        h("dt", {}, t("size")), h("dd", {}, String(note.size)),
        h("dt", {}, t("root")), h("dd", {}, h("code", {}, tl.hex(note.root)))),
      h("p", { class: sig.ok ? "ok" : sig.reason === "no-ed25519" ? "muted" : "late", role: "status" },
        sig.ok ? t("sigOk") : sig.reason === "no-ed25519" ? t("sigNoEd") : sig.reason === "no-signature" ? t("sigMissing") : t("sigBad")),
      h("h3", {}, t("signatures")),
      h("ul", {}, await Promise.all(note.sigs.map(async (s) => {
        if (s.name === name) return h("li", {}, s.name, " — ", t("logSig"));
        const line = wkeys.value.split("\n").map((l) => l.trim()).find((l) => l.startsWith(s.name + "+"));
        if (!line) return h("li", {}, s.name, " — ", t("cosig"), " : ", t("cosigNoKey"));
        const wk = tl.parseVerifierKey(line, 4);
        const c = await tl.verifyCosignature(note, wk.name, wk.pub);
        return h("li", { class: c.ok ? "ok" : "late" }, s.name, " — ", t("cosig"), " : ",
          c.ok ? t("cosigOk", fmtDate(new Date(c.time * 1000).toISOString())) : c.reason === "no-ed25519" ? t("sigNoEd") : t("cosigBad"));
      }))),
      h("pre", {}, cp.checkpoint));
    } catch (err) {
      cpOut.append(err.status === 404 ? h("p", { class: "muted" }, t("witnessNone", wit.value)) : errorBox(err));
    }
  };
  wit.addEventListener("change", showCheckpoint);
  wkeys.addEventListener("change", showCheckpoint);
  out.append(h("h2", {}, t("checkpoint")), h("div", { class: "row" }, lw, wit), cpOut);
  await showCheckpoint();
  // Whole-chain verification on demand.
  const vOut = h("div", { "aria-live": "polite" });
  out.append(h("h2", {}, t("verifyChain")), h("button", { type: "button", onclick: async (e) => {
    clear(vOut);
    e.target.disabled = true;
    try {
      const r = await api("POST", "/compliance/v1/ledger/verify");
      vOut.append(h("p", { class: r.ok ? "ok" : "late", role: "status" }, r.ok ? t("chainOk", r.summary || "") : t("chainBad", JSON.stringify(r.broken || r.register))));
    } catch (err) { vOut.append(errorBox(err)); }
    e.target.disabled = false;
  } }, t("verifyChain")), vOut);
  // A tenant's entry, proved in the browser.
  out.append(h("h2", {}, t("inclusionTitle")), inclusionForm(() => keyIn.value, state.claims.tenant));
}

function inclusionForm(getKey, tenant) {
  const [l1, ten] = field(t("tenantId"), (id) => h("input", { id, type: "text", required: true, value: tenant }));
  const [l2, pos] = field(t("position"), (id) => h("input", { id, type: "number", min: "1", required: true, value: "1" }));
  const res = h("div", { "aria-live": "polite" });
  const form = h("form", { class: "grid card" }, l1, ten, l2, pos, h("div", { class: "full" }, h("button", { type: "submit" }, t("check"))), h("div", { class: "full" }, res));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clear(res);
    try {
      const r = await checkTenantEntry(getKey(), ten.value.trim(), Number(pos.value));
      res.append(resultBox(r), h("pre", {}, JSON.stringify(r.payload, null, 2)));
    } catch (err) { res.append(errorBox(err)); }
  });
  return form;
}

// ---- tenants ---------------------------------------------------------------

async function pageTenants(out) {
  const data = await api("GET", "/admin/v1/tenants");
  const ts = data.tenants || [];
  out.append(h("h1", {}, t("tenantsTitle")));
  const rows = ts.map((x) => {
    const active = x.status === "active";
    const act = h("form", {}, h("button", { type: "submit", class: "secondary", "aria-label": (active ? t("suspend") : t("activate")) + " " + x.id }, active ? t("suspend") : t("activate")));
    submitting(act, async () => {
      await api("POST", "/admin/v1/tenants/" + encodeURIComponent(x.id) + (active ? "/suspend" : "/activate"));
      return active ? t("suspended", x.id) : t("activated", x.id);
    });
    return h("tr", {}, h("td", {}, h("a", { href: "#/tenant/" + encodeURIComponent(x.id) }, h("code", {}, x.id))), h("td", {}, x.name || ""), h("td", { class: active ? null : "late" }, t("tst_" + x.status)),
      h("td", {}, x.tier || ""), h("td", {}, x.zeroing || ""),
      h("td", {}, x.quotas ? `${x.quotas.kv_pages} ${t("pages").toLowerCase()} · ${x.quotas.max_concurrent} · ${x.quotas.tokens_per_minute}/min` : ""),
      h("td", {}, String(x.notice_deadline_hours ?? "")), h("td", {}, x.incident_contact || ""), h("td", {}, act));
  });
  out.append(table(["id", t("name"), t("status"), t("tier"), t("zeroing"), t("quotas"), t("noticeHours"), t("contact"), t("actions")], rows, t("tenantsTitle")));
  const models = (ts[0] && ts[0].allowed_models) || [];
  const [l1, id] = field("id", (fid) => h("input", { id: fid, type: "text", required: true, pattern: "[A-Za-z0-9][A-Za-z0-9._\\-]*" }));
  const [l2, nm] = field(t("name"), (fid) => h("input", { id: fid, type: "text" }));
  const [l3, tier] = field(t("tier"), (fid) => h("select", { id: fid }, ["shared", "dedicated"].map((v) => h("option", { value: v }, v))));
  const [l4, zero] = field(t("zeroing"), (fid) => h("select", { id: fid }, ["cross-tenant", "always", "never"].map((v) => h("option", { value: v }, v))));
  const [l5, kv] = field(t("kvPages"), (fid) => h("input", { id: fid, type: "number", min: "1", value: "512" }));
  const [l6, hrs] = field(t("noticeHours"), (fid) => h("input", { id: fid, type: "number", min: "0", value: "24" }));
  const [l7, ct] = field(t("contact"), (fid) => h("input", { id: fid, type: "text" }));
  const [l8, md] = field(t("models"), (fid) => h("input", { id: fid, type: "text", value: models.join(",") }));
  const form = h("form", { class: "grid card", "aria-labelledby": "create-h" }, h("h2", { id: "create-h", class: "full" }, t("createTenant")),
    l1, id, l2, nm, l3, tier, l4, zero, l5, kv, l6, hrs, l7, ct, l8, md, h("div", { class: "full" }, h("button", { type: "submit" }, t("create"))));
  out.append(submitting(form, async () => {
    const created = await api("POST", "/admin/v1/tenants", {
      id: id.value.trim(), name: nm.value, tier: tier.value, zeroing: zero.value, status: "active", classification: "internal",
      quotas: { kv_pages: Number(kv.value), max_concurrent: 16, tokens_per_minute: 200000, max_context: 1048576 },
      allowed_models: md.value.split(",").map((s) => s.trim()).filter(Boolean),
      notice_deadline_hours: Number(hrs.value), incident_contact: ct.value,
    });
    return t("created", created.id);
  }));
}

// pageTenant: one tenant's quotas, models, notice clause and residency
// (PATCH /admin/v1/tenants/{id}: the fields given change), and its API
// clients (list, register, revoke).
async function pageTenant(out, id) {
  const x = await api("GET", "/admin/v1/tenants/" + encodeURIComponent(id));
  const path = "/admin/v1/tenants/" + encodeURIComponent(x.id);
  out.append(h("h1", {}, t("tenantId"), " ", x.id), h("p", {}, x.name || ""));
  const q = x.quotas || {};
  const res = x.residency || {};
  const [l1, mc] = field(t("maxConcurrent"), (fid) => h("input", { id: fid, type: "number", min: "1", value: String(q.max_concurrent) }));
  const [l2, tpm] = field(t("tokensPerMinute"), (fid) => h("input", { id: fid, type: "number", min: "1", value: String(q.tokens_per_minute) }));
  const [l3, ctx] = field(t("maxContext"), (fid) => h("input", { id: fid, type: "number", min: "1", value: String(q.max_context) }));
  const served = await servedModels();
  const [l4, md] = field(t("models"), (fid) => h("input", { id: fid, type: "text", value: (x.allowed_models || []).join(","),
    "aria-describedby": served.length > 0 ? "served-models" : null }));
  const [l5, hrs] = field(t("noticeHours"), (fid) => h("input", { id: fid, type: "number", min: "0", value: String(x.notice_deadline_hours ?? 0) }));
  const [l6, ct] = field(t("contact"), (fid) => h("input", { id: fid, type: "text", value: x.incident_contact || "" }));
  const [l7, rg] = field(t("regions"), (fid) => h("input", { id: fid, type: "text", value: (res.regions || []).join(",") }));
  const [l8, nt] = field(t("nodeTier"), (fid) => h("input", { id: fid, type: "text", value: res.tier || "" }));
  const list = (v) => v.split(",").map((s) => s.trim()).filter(Boolean);
  const form = h("form", { class: "grid card", "aria-labelledby": "upd-h" }, h("h2", { id: "upd-h", class: "full" }, t("updateTenant")),
    h("p", { class: "full muted" }, t("kvPagesFixed", q.kv_pages, x.tier, x.zeroing)),
    served.length > 0 ? h("p", { class: "full muted", id: "served-models" }, t("servedModels", served.map((m) => m.id).join(", "))) : null,
    l1, mc, l2, tpm, l3, ctx, l4, md, l5, hrs, l6, ct, l7, rg, l8, nt, h("div", { class: "full" }, h("button", { type: "submit" }, t("save"))));
  out.append(submitting(form, async () => {
    await api("PATCH", path, {
      quotas: { max_concurrent: Number(mc.value), tokens_per_minute: Number(tpm.value), max_context: Number(ctx.value) },
      allowed_models: list(md.value), notice_deadline_hours: Number(hrs.value), incident_contact: ct.value,
      residency: { regions: list(rg.value), tier: nt.value.trim() },
    });
    return t("updated", x.id);
  }));
  await adapterSection(out, x.id, served);
  // API clients.
  const cs = (await api("GET", path + "/clients")).clients || [];
  out.append(h("h2", {}, t("clients")));
  out.append(cs.length === 0 ? h("p", { class: "muted" }, t("none")) : table(["id", t("name"), t("scopes"), t("status"), t("actions")], cs.map((c) => {
    const act = c.status === "active" ? submitting(h("form", {}, h("button", { type: "submit", class: "secondary", "aria-label": t("revoke") + " " + c.id }, t("revoke"))), async () => {
      await api("POST", "/admin/v1/clients/" + encodeURIComponent(c.id) + "/revoke");
      return t("revoked", c.id);
    }) : "";
    return h("tr", {}, h("td", {}, h("code", {}, c.id)), h("td", {}, c.name || ""), h("td", {}, (c.scopes || []).join(", ")),
      h("td", { class: c.status === "active" ? null : "late" }, c.status), h("td", {}, act));
  }), t("clients")));
  const [c1, cid] = field("id", (fid) => h("input", { id: fid, type: "text", required: true }));
  const [c2, cname] = field(t("name"), (fid) => h("input", { id: fid, type: "text" }));
  const boxes = ["infer", "compliance:read", "compliance:write"].map((sc) => {
    const [lb, cb] = field(sc, (fid) => h("input", { id: fid, type: "checkbox", value: sc, checked: sc === "infer" }));
    return h("span", { class: "row" }, cb, lb);
  });
  const cform = h("form", { class: "grid card", "aria-labelledby": "cli-h" }, h("h2", { id: "cli-h", class: "full" }, t("registerClient")),
    c1, cid, c2, cname, h("span", {}, t("scopes")), h("div", { class: "row" }, boxes), h("div", { class: "full" }, h("button", { type: "submit" }, t("create"))));
  out.append(submitting(cform, async () => {
    const scopes = [...cform.querySelectorAll("input[type=checkbox]")].filter((b) => b.checked).map((b) => b.value);
    const c = await api("POST", path + "/clients", { id: cid.value.trim(), name: cname.value, scopes });
    return t("clientCreated", c.id);
  }));
}

// servedModels: the node's models (GET /admin/v1/models), the first one
// its main model; [] where the node loads none at run time.
async function servedModels() {
  try {
    return (await api("GET", "/admin/v1/models")).models || [];
  } catch {
    return [];
  }
}

// adapterSection: a tenant's LoRA adapters (name, model, digest) with
// their unregistration, and the registration of a file from the node's
// model directory (POST /admin/v1/adapters) for one of models (the served
// ones, servedModels): the node reads and checks it.
async function adapterSection(out, tenant, models) {
  const ads = (await api("GET", "/admin/v1/tenants/" + encodeURIComponent(tenant) + "/adapters")).adapters || [];
  out.append(h("h2", {}, t("adapters")));
  out.append(ads.length === 0 ? h("p", { class: "muted" }, t("none")) : table([t("name"), t("model"), t("digest"), t("actions")], ads.map((a) => {
    const act = submitting(h("form", {}, h("button", { type: "submit", class: "secondary", "aria-label": t("unregister") + " " + a.name + " (" + a.model + ")" }, t("unregister"))), async () => {
      await api("DELETE", "/admin/v1/tenants/" + encodeURIComponent(tenant) + "/adapters/" + encodeURIComponent(a.name) + "?model=" + encodeURIComponent(a.model));
      return t("adapterUnregistered", a.name);
    });
    return h("tr", {}, h("td", {}, h("code", {}, a.name)), h("td", {}, h("code", {}, a.model)), h("td", {}, h("code", { class: "digest" }, a.digest || "")), h("td", {}, act));
  }), t("adapters")));
  const [a1, an] = field(t("adapterName"), (fid) => h("input", { id: fid, type: "text", required: true, maxlength: "64", pattern: "[A-Za-z0-9._\\-]+" }));
  const [a2, am] = field(t("model"), (fid) => models.length > 0
    ? h("select", { id: fid }, models.map((m) => h("option", { value: m.id }, m.id)))
    : h("input", { id: fid, type: "text" }));
  const [a3, af] = field(t("adapterFile"), (fid) => h("input", { id: fid, type: "text", required: true }));
  const aform = h("form", { class: "grid card", "aria-labelledby": "ad-h" }, h("h2", { id: "ad-h", class: "full" }, t("registerAdapter")),
    a1, an, a2, am, a3, af, h("div", { class: "full" }, h("button", { type: "submit" }, t("registerBtn"))));
  out.append(submitting(aform, async () => {
    const a = await api("POST", "/admin/v1/adapters", { tenant, name: an.value.trim(), path: af.value.trim(), model: am.value.trim() });
    return t("adapterRegistered", a.name);
  }));
}

// pageKeys: the JWT signing keys (public halves), rotation and retirement.
async function pageKeys(out) {
  const ks = (await api("GET", "/admin/v1/keys")).keys || [];
  out.append(h("h1", {}, t("keysTitle")));
  out.append(table(["kid", "issuer", t("state"), t("createdAt"), t("actions")], ks.map((k) => {
    const act = k.state === "current" || k.state === "retired" ? "" : submitting(h("form", {}, h("button", { type: "submit", class: "secondary", "aria-label": t("retire") + " " + k.kid }, t("retire"))), async () => {
      await api("POST", "/admin/v1/keys/" + encodeURIComponent(k.kid) + "/retire");
      return t("retired", k.kid);
    });
    return h("tr", {}, h("td", {}, h("code", {}, k.kid)), h("td", {}, k.issuer || ""), h("td", {}, k.state || ""), h("td", {}, fmtDate(k.created_at)), h("td", {}, act));
  }), t("keysTitle")));
  const rot = h("form", { class: "row" }, h("button", { type: "submit" }, t("rotate")));
  out.append(submitting(rot, async () => {
    await api("POST", "/admin/v1/keys/rotate");
    return t("rotated");
  }));
  // One token revoked: pasted, its jti, issuer, expiry and tenant read
  // from it to name it (the node keeps it on the list until it expires).
  const [l1, tok] = field(t("tokenToRevoke"), (fid) => h("textarea", { id: fid, required: true, spellcheck: "false", autocomplete: "off" }));
  const form = h("form", { class: "grid card", "aria-labelledby": "rev-h" }, h("h2", { id: "rev-h", class: "full" }, t("revokeToken")),
    l1, tok, h("div", { class: "full" }, h("button", { type: "submit" }, t("revoke"))));
  out.append(submitting(form, async () => {
    const raw = tok.value.trim();
    tok.value = "";
    let c;
    try {
      const p = raw.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
      c = JSON.parse(new TextDecoder().decode(tl.b64decode(p + "=".repeat((4 - (p.length % 4)) % 4))));
    } catch {
      throw new Error(t("notAToken"));
    }
    if (typeof c.jti !== "string" || typeof c.iss !== "string" || typeof c.exp !== "number") throw new Error(t("notAToken"));
    await api("POST", "/admin/v1/tokens/revoke", { jti: c.jti, issuer: c.iss, expires_at: new Date(c.exp * 1000).toISOString(), tenant: typeof c.tenant === "string" ? c.tenant : undefined });
    return t("tokenRevoked", c.jti, String(c.sub ?? ""));
  }));
}

// pagePolicy: a new policy bundle (.rego files read in the browser) sent
// to POST /admin/v1/policies/reload; the node checks and compiles it,
// ledgers its digest and answers its revision.
async function pagePolicy(out) {
  out.append(h("h1", {}, t("policyTitle")));
  // The serving bundle, read back (GET /admin/v1/policies), as text.
  const cur = await api("GET", "/admin/v1/policies");
  const names = Object.keys(cur.files || {}).sort();
  out.append(h("section", { class: "card", "aria-labelledby": "pol-cur" }, h("h2", { id: "pol-cur" }, t("policyCurrent")),
    h("p", {}, t("policyRevision"), " : ", h("code", { id: "policy-revision" }, cur.revision)),
    names.map((n) => h("details", {}, h("summary", {}, n), h("pre", {}, cur.files[n])))));
  out.append(h("h2", {}, t("reload")), h("p", { class: "muted" }, t("policyHelp")));
  const [l1, files] = field(t("policyFiles"), (fid) => h("input", { id: fid, type: "file", multiple: true, accept: ".rego", required: true }));
  const form = h("form", { class: "grid card" }, l1, files, h("div", { class: "full" }, h("button", { type: "submit" }, t("reload"))));
  out.append(submitting(form, async () => {
    const bundle = {};
    for (const f of files.files) bundle[f.name] = await f.text();
    const r = await api("POST", "/admin/v1/policies/reload", { files: bundle });
    return t("reloaded", Object.keys(bundle).length, r.revision);
  }));
}

// ---- node ------------------------------------------------------------------

async function pageNode(out) {
  out.append(h("h1", {}, t("nodeTitle")));
  let att, pool;
  if (has("admin")) { const p = await api("GET", "/admin/v1/pool"); att = p.attestation; pool = p.pool; } else { att = await api("GET", "/v1/attestation"); }
  out.append(h("h2", {}, t("attestation")),
    h("p", { class: att.ok ? "ok" : "late", role: "status" }, att.ok ? t("attOk") : t("attBad")),
    h("dl", { class: "kv" },
      h("dt", {}, t("modelContext")), h("dd", {}, String(att.model_context)),
      h("dt", {}, t("servedContext")), h("dd", {}, String(att.served_context)),
      h("dt", {}, t("poolTokens")), h("dd", {}, String(att.pool_tokens)),
      h("dt", {}, "k"), h("dd", {}, String(att.k)),
      h("dt", {}, t("zeroing")), h("dd", {}, String(att.zeroing)),
      h("dt", {}, "KV"), h("dd", {}, String(att.kv_type || ""))));
  if (!pool) return;
  // Each served model has its own pool and attestation (?model=ID).
  const models = await servedModels();
  if (models.length > 0) {
    const atts = await Promise.all(models.map((m) => api("GET", "/v1/attestation?model=" + encodeURIComponent(m.id))));
    out.append(h("h2", {}, t("perModel")), table([t("model"), t("attState"), t("poolTokens"), t("servedContext"), t("modelContext"), t("digest")],
      models.map((m, i) => {
        const a = atts[i];
        return h("tr", {}, h("td", {}, h("code", {}, m.id)), h("td", { class: a.ok ? "ok" : "late" }, a.ok ? t("attOk") : t("attBad")),
          h("td", {}, String(a.pool_tokens)), h("td", {}, String(a.served_context)), h("td", {}, String(a.model_context)),
          h("td", {}, h("code", { class: "digest" }, a.model_digest || m.digest || "")));
      }), t("perModel")));
  }
  out.append(h("h2", {}, t("pool")), h("dl", { class: "kv" },
    [["pages", pool.Pages], ["free", pool.Free], ["leased", pool.Leased], ["cached", pool.Cached], ["quarantined", pool.Quarantined], ["scrubbed", pool.Scrubbed]]
      .map(([k, v]) => [h("dt", {}, t(k)), h("dd", {}, String(v))])));
  out.append(h("h2", {}, t("partitions")), table([t("tenantId"), t("reserved"), t("leased"), t("cached"), t("scrubbed"), t("violations")],
    (pool.Tenants || []).map((p) => h("tr", {}, h("td", {}, p.Tenant), h("td", {}, String(p.Reserved)), h("td", {}, String(p.Leased)),
      h("td", {}, String(p.Cached)), h("td", {}, String(p.Scrubbed)), h("td", { class: p.Violations > 0 ? "late" : null }, String(p.Violations)))), t("partitions")));
}

// ---- a tenant's own view ---------------------------------------------------

async function pageMine(out) {
  const me = state.claims.tenant;
  out.append(h("h1", {}, t("mineTitle")));
  const data = await api("GET", "/compliance/v1/incidents");
  out.append(h("h2", {}, t("registerTitle")));
  out.append(table([t("incident"), t("status"), t("awareness"), t("otherTenants"), t("deadlines")],
    (data.incidents || []).map((f) => {
      const v = f.Versions[f.Versions.length - 1];
      return h("tr", {}, h("td", {}, h("a", { href: "#/incident/" + encodeURIComponent(f.ID) }, f.ID)), h("td", {}, t("st_" + v.status)),
        h("td", {}, period(v.awareness)), h("td", {}, t("otherCount", v.other_tenants || 0)), h("td", {}, deadlineCell(f.NoticeDeadlines)));
    }), t("registerTitle")));
  // The tenant's log: its latest entries, each checked on demand.
  const vkey = (await api("GET", "/compliance/v1/tlog/key")).trim();
  let size = 0;
  try {
    const cp = await api("GET", "/compliance/v1/tlog/tenant/checkpoint?tenant=" + encodeURIComponent(me), undefined, "application/json");
    size = Number(cp.size);
  } catch (err) { if (err.status !== 404) throw err; }
  out.append(h("h2", {}, t("ledgerEntries")));
  if (size === 0) { out.append(h("p", { class: "muted" }, t("none"))); } else {
    const rows = await api("GET", `/compliance/v1/ledger?from=${Math.max(1, size - 49)}&to=${size}`);
    out.append(table(["#", t("kind"), t("actor"), t("at"), t("check")], rows.reverse().map((r) => {
      const cell = h("td", {});
      cell.append(h("button", { type: "button", class: "secondary", "aria-label": t("verifyEntry") + " " + r.seq, onclick: async () => {
        clear(cell);
        try { cell.append(resultBox(await checkTenantEntry(vkey, me, r.seq))); } catch (err) { cell.append(errorBox(err)); }
      } }, t("verifyEntry")));
      return h("tr", {}, h("td", {}, String(r.seq)), h("td", {}, r.kind), h("td", {}, r.actor || (r.payload && r.payload.actor) || ""), h("td", {}, fmtDate(r.payload && r.payload.occurred_at)), cell);
    }), t("ledgerEntries")));
  }
  // A report the tenant filed, and its verdict.
  out.append(h("h2", {}, t("reports")));
  const [l1, rid] = field(t("reportId"), (id) => h("input", { id, type: "text", required: true }));
  const res = h("div", { "aria-live": "polite" });
  const form = h("form", { class: "grid card" }, l1, rid, h("div", { class: "full" }, h("button", { type: "submit" }, t("show"))), h("div", { class: "full" }, res));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clear(res);
    try {
      const r = await api("GET", "/compliance/v1/reports/" + encodeURIComponent(rid.value.trim()));
      res.append(h("pre", {}, JSON.stringify(r, null, 2)));
    } catch (err) { res.append(errorBox(err)); }
  });
  out.append(form);
}

// ---- start -----------------------------------------------------------------

function start() {
  setLang("fr");
  document.getElementById("lang").addEventListener("click", () => { setLang(getLang() === "fr" ? "en" : "fr"); render(); });
  document.getElementById("signout").addEventListener("click", () => signOut(""));
  document.getElementById("skip").addEventListener("click", (e) => { e.preventDefault(); document.getElementById("main").focus(); });
  window.addEventListener("hashchange", () => render());
  for (const ev of ["keydown", "pointerdown"]) window.addEventListener(ev, () => { state.lastActive = Date.now(); }, { passive: true });
  setInterval(() => {
    if (state.token && Date.now() - state.lastActive > IDLE_MINUTES * 60000) signOut(t("idleOut", IDLE_MINUTES));
  }, 10000);
  fetch("/config.json", { cache: "no-store", credentials: "omit" }).then((r) => r.json()).catch(() => ({})).then(async (c) => {
    config = c || {};
    const params = new URLSearchParams(location.search);
    if (params.has("code") || params.has("error")) {
      try {
        await acceptToken(await oidcReturn(params));
        return;
      } catch (ex) {
        await render();
        document.getElementById("main").prepend(h("p", { class: "error", role: "alert" }, t("badToken", ex.message)));
        return;
      }
    }
    render();
  });
}

start();
