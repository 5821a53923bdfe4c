// The console's journeys in headless Chromium (make console-test, run by
// scripts/console-test.sh against a real cloisond and PostgreSQL). Every
// check throws on failure; the script exits non-zero on the first one.
// The pages run under the console's own CSP (never bypassed), and any CSP
// violation, page error or console error fails the run; axe-core checks
// each page (WCAG 2 A and AA) in a separate context that lets it inject.
import puppeteer from "puppeteer-core";
import { readFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const axeSource = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
const env = (k) => { const v = process.env[k]; if (!v) throw new Error(k + " is not set"); return v; };
const URL = env("CONSOLE_URL"), API = env("API_URL"), SHOTS = env("SHOTS");
const WITNESS = env("WITNESS_VKEY");
const OFFICER = env("OFFICER_TOKEN"), ADMIN = env("ADMIN_TOKEN"), ACME = env("ACME_TOKEN"), INFER = env("INFER_TOKEN"), REPORT = env("REPORT_ID");
const HOSTILE_NAME = '<img src=x onerror="window.__xss=1">ACME';
const HOSTILE_CONTACT = '"><script>window.__xss=2</script>';
const HOSTILE_NEW = "<svg onload=window.__xss=3>beta";
mkdirSync(SHOTS, { recursive: true });

let failures = 0, checks = 0;
function ok(cond, what) {
  checks++;
  if (!cond) { failures++; throw new Error("FAIL: " + what); }
  console.log("  ok  " + what);
}

const browser = await puppeteer.launch({
  executablePath: env("CHROMIUM"), headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--lang=fr-CA"],
});

// page opens a fresh incognito context watched for CSP violations,
// errors, and any sign that hostile markup ran.
async function page() {
  const ctx = await browser.createBrowserContext();
  const p = await ctx.newPage();
  await p.setViewport({ width: 1280, height: 860 });
  p.problems = [];
  p.on("pageerror", (e) => p.problems.push("page error: " + e.message));
  p.on("console", (m) => { if (m.type() === "error" && !/status of 40[134]/.test(m.text())) p.problems.push("console: " + m.text()); });
  await p.exposeFunction("__cspViolation", (v) => p.problems.push("CSP violation: " + v));
  await p.evaluateOnNewDocument(() => {
    document.addEventListener("securitypolicyviolation", (e) => window.__cspViolation(e.violatedDirective + " " + e.blockedURI));
  });
  return p;
}

async function clean(p, where) {
  const xss = await p.evaluate(() => window.__xss);
  ok(xss === undefined, where + ": no hostile markup ran (window.__xss unset)");
  const imgs = await p.evaluate(() => document.querySelectorAll("img, svg, script:not([src])").length);
  ok(imgs === 0, where + ": no element made from API strings (img, svg, inline script)");
  ok(p.problems.length === 0, where + ": no CSP violation, page or console error " + JSON.stringify(p.problems));
}

async function axe(p, where) {
  // Injected through the DevTools protocol, which the page's CSP does not
  // govern; violations it would raise are not the console's and are
  // dropped after the run.
  const before = p.problems.length;
  await p.evaluate(axeSource);
  const res = await p.evaluate(() => window.axe.run(document, { runOnly: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] }));
  p.problems.length = before;
  const v = res.violations.map((x) => x.id + ": " + x.nodes.map((n) => n.target.join(" ")).slice(0, 3).join(", "));
  ok(v.length === 0, where + ": axe-core finds no WCAG 2.1 A/AA violation " + JSON.stringify(v));
}

const text = (p) => p.evaluate(() => document.body.innerText);
async function waitText(p, s, timeout = 15000) {
  await p.waitForFunction((s) => document.body.innerText.includes(s) && !document.querySelector("[aria-busy]"), { timeout }, s);
}
// control returns the form control labelled label (exact text).
async function control(p, label) {
  const h = await p.evaluateHandle((label) => {
    const l = [...document.querySelectorAll("label")].find((x) => x.textContent === label);
    return l ? document.getElementById(l.htmlFor) : null;
  }, label);
  const el = h.asElement();
  if (!el) throw new Error("no control labelled " + label);
  return el;
}
async function fill(p, label, value) {
  const el = await control(p, label);
  await el.evaluate((e) => { e.value = ""; });
  await el.type(value);
}
async function click(p, selector, textContent) {
  const h = await p.evaluateHandle((sel, t) => [...document.querySelectorAll(sel)].find((e) => e.textContent.trim() === t), selector, textContent);
  const el = h.asElement();
  if (!el) throw new Error("nothing to click: " + selector + " " + textContent);
  await el.click();
}
async function signIn(p, token) {
  await p.goto(URL + "/", { waitUntil: "networkidle0" });
  await p.type("main input[type=password]", token);
  await p.click("main button[type=submit]");
  await p.waitForSelector("#signout:not([hidden])", { timeout: 15000 });
  await p.waitForFunction(() => !document.querySelector("[aria-busy]"), { timeout: 15000 });
}
async function shot(p, name) { await p.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: true }); }
// call makes an API call from inside the page, as the page's own code
// could: the console adds no privilege to the token's.
const call = (p, method, path, token) => p.evaluate(async (m, u, t) => (await fetch(u, { method: m, headers: { Authorization: "Bearer " + t } })).status, method, path, token);

let p;
try {
  // ---- the privacy officer --------------------------------------------------
  console.log("== the privacy officer (French first)");
  p = await page();
  await p.goto(URL + "/", { waitUntil: "networkidle0" });
  ok((await p.$eval("html", (e) => e.lang)) === "fr", "the page opens in French");
  await waitText(p, "Connexion");
  await axe(p, "sign-in");
  await p.type("main input[type=password]", "not-a-token");
  await p.click("main button[type=submit]");
  await p.waitForSelector("main .error[role=alert]");
  ok(await p.$eval("#signout", (e) => e.hidden), "a bad token does not sign in");
  // By keyboard: the skip link first, the token field focused, Enter signs in.
  await p.goto(URL + "/", { waitUntil: "networkidle0" });
  ok(await p.evaluate(() => document.activeElement && document.activeElement.type === "password"), "the token field has the focus on arrival");
  await p.keyboard.type(OFFICER);
  await p.keyboard.press("Enter");
  await p.waitForSelector("#signout:not([hidden])", { timeout: 15000 });
  await p.waitForFunction(() => !document.querySelector("[aria-busy]"), { timeout: 15000 });
  ok(await p.evaluate(() => document.querySelector("a[href], button:not([hidden]), input, select, textarea").id === "skip"), "the skip link is the first stop of the Tab order");
  await p.keyboard.press("Tab");
  ok(await p.evaluate(() => document.activeElement.closest("main") !== null), "after sign-in the focus is in the content, Tab moves through it");
  ok(p.url().endsWith("#/register"), "the officer signs in by keyboard and lands on the register");
  await waitText(p, "Registre des incidents de confidentialité");
  ok((await text(p)).includes("en évaluation"), "the tenant's report is in the register, under assessment");
  ok((await text(p)).includes("Le registre concorde avec le journal."), "the register check is shown in words");
  // Open an incident, aware three days ago: acme's 24 h notice is overdue.
  const aware = new Date(Date.now() - 3 * 86400000).toISOString().slice(0, 10);
  await fill(p, "Circonstances (art. 7(2))", "Réponse contenant le texte <b>d’un autre client</b>");
  await fill(p, "Renseignements personnels visés (art. 7(1))", "noms et courriels");
  await (await control(p, "Date de l’incident (art. 7(3))")).evaluate((e, v) => { e.value = v; }, aware);
  await (await control(p, "Date de connaissance (art. 7(4))")).evaluate((e, v) => { e.value = v; }, aware);
  await fill(p, "Nombre de personnes (art. 7(5))", "12");
  await fill(p, "Clients visés (identifiants, séparés par des virgules)", "acme,dev");
  await click(p, "main button", "Ouvrir");
  await waitText(p, "ouvert.");
  const late = await p.$$eval("main li.late", (ls) => ls.map((l) => l.textContent));
  ok(late.some((t) => t.includes("En retard") && t.includes("acme") && t.includes("en retard")), "acme's overdue notice is highlighted, in words too: " + JSON.stringify(late));
  await clean(p, "register");
  await axe(p, "register");
  await shot(p, "console-register");
  // The register's settings: a new version.
  await fill(p, "Personne à joindre", "Claire Officer, RPRP");
  await click(p, "form[aria-labelledby=org-h] button", "Enregistrer");
  await waitText(p, "Réglages du registre : version 1 consignée.");
  ok(true, "the organisation and privacy officer are saved as a new settings version");
  // Export: the PDF downloaded, and the node's verification of those very
  // bytes shown in words; then the whole export (ZIP), fully verified.
  for (const [fmt, magic] of [["pdf", "%PDF-"], ["zip", "PK"]]) {
    await p.goto(URL + "/#/register", { waitUntil: "networkidle0" });
    await waitText(p, "Exporter le registre");
    await (await control(p, "Format")).select(fmt);
    await click(p, "form[aria-labelledby=exp-h] button", "Exporter");
    await p.waitForSelector("#export-verdict", { timeout: 30000 });
    const verdict = await p.$eval("#export-verdict", (e) => e.textContent);
    ok(verdict.startsWith("Export vérifié. verified:"), `the ${fmt} export's verification is shown in words: ${verdict}`);
    // The link offers the bytes verified (a blob: of the answer, named).
    const link = await p.$eval("#export-download", (a) => ({ href: a.href, download: a.download, text: a.textContent }));
    ok(link.href.startsWith("blob:" + URL) && link.download === "cloison-export." + fmt && /\(\d+ octets\)$/.test(link.text), `the ${fmt} export is offered for download: ${JSON.stringify(link)}`);
    // The route answers the format asked for, as an attachment.
    const got = await fetch(API + "/compliance/v1/export?format=" + fmt, { headers: { Authorization: "Bearer " + OFFICER } });
    const head = Buffer.from(await got.arrayBuffer()).subarray(0, magic.length).toString();
    ok(got.status === 200 && head === magic && got.headers.get("content-disposition") === `attachment; filename="cloison-export.${fmt}"`, `the ${fmt} export route answers the file as an attachment`);
    if (fmt === "pdf") await shot(p, "console-export");
  }
  await clean(p, "export");
  await axe(p, "export");
  // The incident: versions, a notice, closing it, drafts.
  const id = await p.$$eval("main table a", (as) => as.map((a) => a.textContent).filter((x) => x.startsWith("inc-")).at(-1));
  await p.goto(URL + "/#/incident/" + id, { waitUntil: "networkidle0" });
  await waitText(p, "Consigner un avis");
  await fill(p, "Nom du destinataire", "dpo@acme.example");
  await fill(p, "Texte de l’avis", "Avis au client : <script>window.__xss=6</script>");
  await click(p, "main button", "Consigner");
  await waitText(p, "Avis n° 1 consigné");
  ok((await text(p)).includes("<script>window.__xss=6</script>"), "the notice text is shown as text");
  // A measure taken (s. 7(8)).
  await fill(p, "Mesure", "clés de session révoquées");
  await click(p, "form[aria-labelledby=measure-h] button", "Consigner");
  await waitText(p, "Version 2 consignée.");
  // The assessment, with the privacy officer's consultation (art. 3.7).
  await fill(p, "Sensibilité des renseignements", "moyenne");
  await fill(p, "Utilisations malveillantes possibles", "hameçonnage");
  await fill(p, "Conséquences appréhendées", "courriels non sollicités");
  await fill(p, "Probabilité d’utilisation préjudiciable", "faible");
  await fill(p, "Responsable de la protection consulté", "Claire Officer");
  await click(p, "#assess-h ~ div button, form[aria-labelledby=assess-h] button", "Consigner");
  await waitText(p, "Version 3 consignée.");
  let changed = await p.$$eval("main td.changed", (tds) => tds.map((t) => t.textContent));
  ok(changed.some((t) => t.startsWith("terminée · risque sérieux · moyenne")), "the completed assessment is version 3, marked as changed: " + JSON.stringify(changed));
  // A deferral of the notice to persons.
  await fill(p, "Motif (enquête)", "enquête policière en cours");
  await click(p, "form[aria-labelledby=defer-h] button", "Consigner");
  await waitText(p, "Version 4 consignée.");
  await click(p, "main button", "Fermer le dossier");
  await waitText(p, "Dossier fermé (version 5)");
  changed = await p.$$eval("main td.changed", (tds) => tds.map((t) => t.textContent));
  ok(changed.some((t) => t.includes("clés de session révoquées")) && changed.some((t) => t.startsWith("enquête policière")) && changed.some((t) => t.startsWith("fermé")),
    "five versions side by side, the deferral and the closing marked where they changed: " + JSON.stringify(changed));
  await click(p, "main button", "Avis à la Commission");
  await p.waitForFunction(() => { const d = document.getElementById("draft"); return d && !d.hidden && d.textContent.includes("AVIS À LA COMMISSION"); }, { timeout: 15000 });
  ok(true, "the Commission draft is shown, as text");
  await clean(p, "incident");
  await axe(p, "incident");
  await shot(p, "console-incident");
  // English.
  await p.click("#lang");
  await waitText(p, "Record a notice");
  ok((await p.$eval("html", (e) => e.lang)) === "en", "the language switch changes the page to English");
  await p.click("#lang");
  await waitText(p, "Consigner un avis");
  // The log: checkpoint verified here, the chain on demand, an inclusion proof.
  await p.goto(URL + "/#/log", { waitUntil: "networkidle0" });
  await waitText(p, "Signature Ed25519 du point de contrôle vérifiée dans ce navigateur.");
  ok(true, "the checkpoint's Ed25519 signature verifies in Chromium's WebCrypto");
  // The witness's cosignature, verified here with its published key.
  await (await control(p, "Clés publiées des témoins (une par ligne), pour vérifier leurs cosignatures ici")).type(WITNESS);
  await (await control(p, "Cosignés par au moins")).select("1");
  await waitText(p, "witness.test/w1 — cosignature de témoin : vérifiée dans ce navigateur", 30000);
  ok(true, "the witness's cosignature on the checkpoint is verified in the browser with its published key");
  await click(p, "main button", "Vérifier toute la chaîne");
  await waitText(p, "Chaîne intacte");
  ok(true, "the whole-chain verification result is shown in words");
  await fill(p, "Client", "acme");
  await click(p, "main button", "Vérifier");
  await waitText(p, "chemin de Merkle vérifié dans ce navigateur");
  ok(true, "acme's entry 1 is proved in the browser (signature and Merkle path)");
  // A wrong verifier key: the page says the signature does not verify.
  await clean(p, "log");
  await axe(p, "log");
  await shot(p, "console-log");
  // Idle expiry: the page's clock moved 16 minutes on, it forgets the token.
  await p.evaluate(() => { const real = Date.now; Date.now = () => real() + 16 * 60000; });
  await p.waitForFunction(() => document.getElementById("signout").hidden, { timeout: 20000 });
  ok((await text(p)).includes("Session fermée après 15 minutes d’inactivité."), "after 15 idle minutes the page signs out, and says so");
  await signIn(p, OFFICER);
  await p.click("#signout");
  await p.waitForSelector("main input[type=password]");
  ok(!(await p.content()).includes(OFFICER), "signing out leaves no token in the page");
  await p.reload({ waitUntil: "networkidle0" });
  ok(await p.$eval("#signout", (e) => e.hidden), "a reload is signed out (the token lived in memory only)");
  const storage = await p.evaluate(async () => ({ cookies: document.cookie, ls: localStorage.length, ss: sessionStorage.length }));
  ok(storage.cookies === "" && storage.ls === 0 && storage.ss === 0, "nothing stored: no cookie, no localStorage, no sessionStorage");

  // ---- the administrator ----------------------------------------------------
  console.log("== the administrator");
  p = await page();
  await signIn(p, ADMIN);
  ok(p.url().endsWith("#/tenants"), "an administrator without compliance scopes lands on the tenants");
  await waitText(p, HOSTILE_NAME);
  ok(true, "the hostile tenant name is shown as text");
  ok((await text(p)).includes(HOSTILE_CONTACT), "the hostile incident contact is shown as text");
  await fill(p, "id", "beta");
  await fill(p, "Nom", HOSTILE_NEW);
  await click(p, "main button", "Créer");
  await waitText(p, "Client beta créé.");
  ok((await text(p)).includes(HOSTILE_NEW), "a tenant created with a hostile name is listed as text");
  // beta's notice clause, and an API client registered then revoked.
  await p.goto(URL + "/#/tenant/beta", { waitUntil: "networkidle0" });
  await waitText(p, "Modifier le client");
  await fill(p, "Délai d’avis (heures)", "48");
  await fill(p, "Contact incidents", "dpo@beta.example");
  await click(p, "main button", "Enregistrer");
  await waitText(p, "Client beta modifié.");
  ok(await p.$$eval("main input", (is) => is.some((i) => i.value === "dpo@beta.example")), "beta's notice clause is updated, read back from the node");
  await fill(p, "id", "app-beta");
  await fill(p, "Nom", "<img src=x onerror=window.__xss=7>");
  await click(p, "main button", "Créer");
  await waitText(p, "Client d’API app-beta inscrit.");
  ok((await text(p)).includes("<img src=x onerror=window.__xss=7>"), "an API client with a hostile name is listed as text");
  await click(p, "main button", "Révoquer");
  await waitText(p, "Client d’API app-beta révoqué.");
  ok((await p.$$eval("main td.late", (tds) => tds.map((x) => x.textContent))).includes("revoked"), "the revoked client shows as revoked");
  // beta's LoRA adapters: a file of the node's model directory registered
  // for coder, listed with its digest, then unregistered. A hostile file
  // name is refused and the refusal shown as text.
  ok((await text(p)).includes("Adaptateurs LoRA"), "the tenant page lists its adapters");
  ok((await text(p)).includes("Modèles servis par le nœud : cloison-context-bag, coder"), "the tenant page shows the models the node serves beside those the tenant may use");
  await fill(p, "Nom de l’adaptateur", "support");
  await (await control(p, "Modèle")).select("coder");
  await fill(p, "Fichier (dans le répertoire des modèles)", "<img src=x onerror=window.__xss=8>.gguf");
  await click(p, "main button", "Inscrire");
  await p.waitForSelector("main .error[role=alert]");
  ok((await p.$eval("main .error[role=alert]", (e) => e.textContent)).length > 0, "an adapter file name outside the model directory's files is refused, in words");
  p.problems = p.problems.filter((x) => !/\b(400|404)\b/.test(x)); // the refusal's console line
  await clean(p, "adapter refused");
  // coder is not among beta's models yet: the node refuses its adapter and
  // says why; once the administrator allows coder, the same file registers.
  await fill(p, "Fichier (dans le répertoire des modèles)", "support.gguf");
  await click(p, "main button", "Inscrire");
  await waitText(p, "allow it first");
  ok(true, "an adapter of a model the tenant may not use is refused, in words");
  p.problems = p.problems.filter((x) => !/\b(400|404)\b/.test(x));
  await fill(p, "Modèles permis (séparés par des virgules)", "cloison-context-bag, coder");
  await click(p, "main button", "Enregistrer");
  await waitText(p, "Client beta modifié.");
  await fill(p, "Nom de l’adaptateur", "support");
  await (await control(p, "Modèle")).select("coder");
  await fill(p, "Fichier (dans le répertoire des modèles)", "support.gguf");
  await click(p, "main button", "Inscrire");
  await waitText(p, "Adaptateur support inscrit.");
  const adRow = await p.$$eval("main table tr", (trs) => trs.map((r) => r.innerText).find((x) => x.includes("support")) || "");
  ok(adRow.includes("coder") && /[0-9a-f]{64}/.test(adRow), "the adapter is listed with its model and digest: " + adRow.replace(/\s+/g, " "));
  await clean(p, "adapter");
  await axe(p, "adapter");
  await shot(p, "console-adapters");
  await click(p, "main button", "Désinscrire");
  await waitText(p, "Adaptateur support désinscrit.");
  ok(!(await p.$$eval("main table tr", (trs) => trs.some((r) => r.innerText.includes("support")))), "the unregistered adapter is no longer listed");
  await clean(p, "tenant");
  await axe(p, "tenant");
  // Keys: listed; a rotation too soon is refused, and the page says why.
  await p.goto(URL + "/#/keys", { waitUntil: "networkidle0" });
  await waitText(p, "Clés de signature des jetons");
  ok((await text(p)).includes("current"), "the signing keys are listed with their state");
  await click(p, "main button", "Faire tourner les clés");
  await p.waitForSelector("main .error[role=alert]");
  ok((await p.$eval("main .error[role=alert]", (e) => e.textContent)).includes("too recently"), "a refused rotation is explained in words");
  p.problems = p.problems.filter((x) => !x.includes("409")); // the refusal's console line
  await clean(p, "keys");
  await axe(p, "keys");
  // The policy bundle: the repository's own files, read in the browser and reloaded.
  await p.goto(URL + "/#/policy", { waitUntil: "networkidle0" });
  await waitText(p, "Politique d’admission (OPA)");
  const rev0 = await p.$eval("#policy-revision", (e) => e.textContent);
  ok(/^sha256:[0-9a-f]{64}$/.test(rev0) && (await text(p)).includes("decision.rego"), "the serving policy bundle is shown, its revision and files: " + rev0);
  const rego = ["attestation", "classification", "context", "decision", "models", "residency", "tenant"].map((n) => `${process.env.POLICY_DIR}/${n}.rego`);
  await (await control(p, "Fichiers .rego")).uploadFile(...rego);
  await click(p, "main button", "Recharger");
  await waitText(p, "Lot de 7 fichier(s) appliqué : révision");
  ok(true, "a policy bundle is reloaded from files chosen in the browser");
  await p.waitForFunction((r) => { const e = document.getElementById("policy-revision"); return e && e.textContent !== r; }, { timeout: 15000 }, rev0);
  ok((await p.$eval("#policy-revision", (e) => e.textContent)) === (await text(p)).match(/révision (sha256:[0-9a-f]{64})/)[1], "after the reload the page shows the new bundle as serving");
  await shot(p, "console-policy");
  await clean(p, "policy");
  await axe(p, "policy");
  await p.goto(URL + "/#/tenants", { waitUntil: "networkidle0" });
  await waitText(p, "Créer un client");
  await click(p, "main button", "Suspendre");  // the first row: acme
  await p.waitForFunction(() => document.body.innerText.includes("suspendu."));
  await p.goto(URL + "/#/tenants", { waitUntil: "networkidle0" });
  await clean(p, "tenants");
  await axe(p, "tenants");
  await shot(p, "console-tenants");
  ok(await call(p, "POST", "/compliance/v1/incidents", ADMIN) === 403, "the console adds no scope: admin without compliance:write is refused a register write (403)");
  ok(await call(p, "GET", "/v1/models", ADMIN) === 404, "the console's origin does not serve the inference API");
  await p.goto(URL + "/#/node", { waitUntil: "networkidle0" });
  await waitText(p, "Attestation valide");
  ok((await text(p)).includes("Partitions par client"), "the node page shows the attestation and the pool partitions");
  await waitText(p, "Attestation par modèle");
  const attRows = await p.$$eval("main table tr", (trs) => trs.map((r) => r.innerText));
  for (const m of ["cloison-context-bag", "coder"]) {
    const r = attRows.find((x) => x.startsWith(m)) || "";
    ok(r.includes("Attestation valide") && /[0-9a-f]{64}/.test(r), "model " + m + "'s own attestation is shown, with its digest: " + r.replace(/\s+/g, " "));
  }
  await clean(p, "node");
  await axe(p, "node");
  await shot(p, "console-node");
  // The ledger names the person: what the console did is under her subject.
  const rows = (await (await fetch(API + "/compliance/v1/ledger?from=1&to=1000", { headers: { Authorization: "Bearer " + OFFICER } })).text())
    .split("\n").filter(Boolean).map((l) => JSON.parse(l));
  ok(rows.some((r) => r.kind === "tenant.created" && r.tenant === "beta" && r.payload.actor === "admin:admin-alice"), "beta's creation is ledgered with the administrator as actor");
  ok(rows.some((r) => r.tenant === "acme" && r.kind === "tenant.disabled" && r.payload.actor === "admin:admin-alice"), "acme's suspension is ledgered with the administrator as actor");
  ok(rows.some((r) => r.tenant === "beta" && r.kind === "tenant.updated" && r.payload.actor === "admin:admin-alice"), "beta's update is ledgered with the administrator as actor");
  ok(rows.some((r) => r.tenant === "beta" && r.kind === "adapter.registered" && r.payload.data.name === "support" && r.payload.data.model === "coder" && r.payload.actor === "admin:admin-alice"), "the adapter's registration is ledgered with the administrator as actor");
  ok(rows.some((r) => r.tenant === "beta" && r.kind === "adapter.unregistered" && r.payload.data.name === "support" && r.payload.actor === "admin:admin-alice"), "the adapter's unregistration is ledgered with the administrator as actor");
  ok(rows.some((r) => r.kind === "policy.reloaded" && r.payload.data.actor === "admin:admin-alice" && r.payload.data.files === 7), "the policy reload (7 files) is ledgered with the administrator as its actor");
  await fetch(API + "/admin/v1/tenants/acme/activate", { method: "POST", headers: { Authorization: "Bearer " + ADMIN } });

  // ---- a token with no console scope -----------------------------------------
  console.log("== an inference-only token");
  p = await page();
  await signIn(p, INFER);
  ok(p.url().endsWith("#/node"), "an inference token sees only the node's attestation");
  ok(await call(p, "GET", "/admin/v1/tenants", INFER) === 403, "and the admin API refuses it (403)");
  await clean(p, "infer");

  // ---- a tenant's compliance officer ------------------------------------------
  console.log("== acme's compliance officer");
  p = await page();
  await signIn(p, ACME);
  ok(p.url().endsWith("#/mine"), "the tenant's officer lands on its own view");
  await waitText(p, "1 autre(s) client(s) (non nommés)");
  ok(true, "a shared incident counts the other tenant without naming it");
  const first = await p.$("main button[aria-label^='Vérifier l’inclusion']");
  await first.click();
  await waitText(p, "chemin de Merkle vérifié dans ce navigateur");
  ok(true, "an entry of acme's log is proved in the browser");
  await fill(p, "Identifiant du signalement", REPORT);
  await click(p, "main button", "Afficher");
  await p.waitForFunction(() => [...document.querySelectorAll("main pre")].some((e) => e.textContent.includes("foreign")), { timeout: 15000 });
  ok(true, "the tenant's report is read back");
  ok(await call(p, "GET", "/admin/v1/tenants", ACME) === 403, "the tenant's officer cannot reach the admin API through the console (403)");
  ok(await call(p, "GET", "/compliance/v1/tlog/checkpoint", ACME) === 403, "nor the global log");
  await clean(p, "mine");
  await axe(p, "mine");
  await shot(p, "console-tenant");

  // ---- sign-in with the OpenID Connect provider (code + PKCE) ------------------
  console.log("== the officer signs in with the identity provider");
  p = await page();
  await p.goto(URL + "/?code=forged&state=forged", { waitUntil: "networkidle0" });
  await p.waitForSelector("main .error[role=alert]");
  ok(await p.$eval("#signout", (e) => e.hidden) && !p.url().includes("code="), "a return from the provider this tab did not start signs nobody in, and the code leaves the address bar");
  await p.waitForSelector("#oidc");
  await Promise.all([p.waitForNavigation({ waitUntil: "networkidle0" }), p.click("#oidc")]);
  await p.waitForSelector("#signout:not([hidden])", { timeout: 15000 });
  await p.waitForFunction(() => !document.querySelector("[aria-busy]"), { timeout: 15000 });
  ok((await p.$eval("#who", (e) => e.textContent)).startsWith("officer-oidc"), "signed in as the provider's person, with its token's scopes");
  ok(p.url() === URL + "/#/register", "the code is gone from the address bar: " + p.url());
  ok(await p.evaluate(() => sessionStorage.length === 0 && localStorage.length === 0 && document.cookie === ""), "the PKCE verifier is gone from sessionStorage; nothing is stored");
  await p.goto(URL + "/#/tenants", { waitUntil: "networkidle0" });
  await waitText(p, "Créer un client");
  await click(p, "main button", "Suspendre"); // acme
  await p.waitForFunction(() => document.body.innerText.includes("suspendu."));
  const rows2 = (await (await fetch(API + "/compliance/v1/ledger?from=1&to=1000", { headers: { Authorization: "Bearer " + OFFICER } })).text())
    .split("\n").filter(Boolean).map((l) => JSON.parse(l));
  const actor = rows2.filter((r) => r.tenant === "acme" && r.kind === "tenant.disabled").map((r) => r.payload.actor).at(-1);
  ok(String(actor).includes("officer-oidc"), "a change made after an OIDC sign-in is ledgered under the provider's subject: " + actor);
  await clean(p, "oidc");
  await fetch(API + "/admin/v1/tenants/acme/activate", { method: "POST", headers: { Authorization: "Bearer " + ADMIN } });

  // ---- the page's verifier against tampering -----------------------------------
  console.log("== tlog.js refuses tampered checkpoints and proofs (the same module, in node)");
  const tl = await import("./tlog.js");
  const H = { Authorization: "Bearer " + ACME, Accept: "application/json" };
  const vkey = (await (await fetch(API + "/compliance/v1/tlog/key")).text()).trim();
  const { name, pub } = tl.parseVerifierKey(vkey);
  const tname = name + "/tenant/acme";
  const cp = await (await fetch(API + "/compliance/v1/tlog/tenant/checkpoint?tenant=acme", { headers: H })).json();
  const note = tl.parseNote(cp.checkpoint);
  ok((await tl.verifyNote(note, tname, pub)).ok, "the genuine tenant checkpoint verifies");
  ok(!(await tl.verifyNote({ ...note, text: note.text.replace(/\n\d+\n/, "\n999\n") }, tname, pub)).ok, "a checkpoint with another size does not");
  ok(!(await tl.verifyNote(note, name, pub)).ok, "nor under the global log's key name (logs kept apart)");
  const other = tl.parseVerifierKey("x+00000000+" + Buffer.from([1, ...new Uint8Array(32).fill(7)]).toString("base64"));
  ok((await tl.verifyNote(note, tname, other.pub)).reason === "no-signature", "nor under another key");
  const pos = Number(note.size) > 1 ? 2 : 1;
  const pr = await (await fetch(API + `/compliance/v1/tlog/tenant/inclusion?tenant=acme&seq=${pos}&tree_size=${note.size}`, { headers: H })).json();
  const proof = pr.proof.map(tl.b64decode);
  const leaf = await tl.leafHash(tl.canonical(pr.payload));
  ok(await tl.verifyInclusion(leaf, BigInt(pos - 1), note.size, proof, note.root), "the genuine inclusion proof verifies");
  ok(!(await tl.verifyInclusion(await tl.leafHash(tl.canonical({ ...pr.payload, actor: "someone-else" })), BigInt(pos - 1), note.size, proof, note.root)), "an altered payload does not");
  ok(!(await tl.verifyInclusion(leaf, BigInt(pos % Number(note.size)), note.size, proof, note.root)), "nor the entry at another position");
  ok(!(await tl.verifyInclusion(leaf, BigInt(pos - 1), note.size * 4n, proof, note.root)), "nor in a tree of a size the path does not fit");
  ok(!(await tl.verifyInclusion(leaf, note.size, note.size, proof, note.root)), "nor at a position beyond the tree");
  const flipped = proof.map((p, i) => (i === 0 ? Uint8Array.from(p, (b, j) => (j === 0 ? b ^ 1 : b)) : p));
  ok(proof.length === 0 || !(await tl.verifyInclusion(leaf, BigInt(pos - 1), note.size, flipped, note.root)), "nor with a proof hash changed");
  // A real cosignature (cloisonctl witness), then tampered with.
  const cos = await (await fetch(API + "/compliance/v1/tlog/checkpoint?witnesses=1", { headers: { Authorization: "Bearer " + OFFICER, Accept: "application/json" } })).json();
  const cnote = tl.parseNote(cos.checkpoint);
  const w = tl.parseVerifierKey(WITNESS, 4);
  ok((await tl.verifyCosignature(cnote, w.name, w.pub)).ok, "the witness's genuine cosignature verifies");
  ok(!(await tl.verifyCosignature({ ...cnote, text: cnote.text.replace(/\n\d+\n/, "\n1\n") }, w.name, w.pub)).ok, "not over another tree");
  ok(!(await tl.verifyCosignature(cnote, w.name, other.pub)).ok, "nor under another key");
  let threw = false;
  try { tl.parseVerifierKey(WITNESS, 1); } catch { threw = true; }
  ok(threw, "a witness key is not taken for a log key (0x04 vs 0x01)");
  ok(tl.canonical({ b: 1, a: [1.5, "é<\u2028"], "\u00e9": null, A: true }) === '{"A":true,"a":[1.5,"é<\u2028"],"b":1,"é":null}', "canonical JSON is RFC 8785's (keys by UTF-16 code units)");

  // ---- revoking a token ----------------------------------------------------------
  console.log("== the administrator revokes a token");
  p = await page();
  await signIn(p, ADMIN);
  await p.goto(URL + "/#/keys", { waitUntil: "networkidle0" });
  await waitText(p, "Révoquer un jeton");
  ok(await call(p, "GET", "/v1/attestation", INFER) === 200, "the inference token works before");
  await (await control(p, "Jeton à révoquer (collé)")).type(INFER);
  await click(p, "form[aria-labelledby=rev-h] button", "Révoquer");
  await waitText(p, "(sujet app-dev) révoqué.");
  ok(await call(p, "GET", "/v1/attestation", INFER) === 401, "and is refused at once after its revocation in the console");
  await clean(p, "revoke");

  // ---- clickjacking -----------------------------------------------------------
  console.log("== framing");
  p = await page();
  await p.goto(API + "/healthz"); // another origin
  p.problems.length = 0;
  await p.setContent(`<iframe id="f" src="${URL}/" width="600" height="400"></iframe>`);
  await new Promise((r) => setTimeout(r, 1500));
  const framed = p.frames().find((f) => f !== p.mainFrame());
  const inside = framed ? await framed.evaluate(() => document.body ? document.body.innerText : "").catch(() => "") : "";
  ok(!inside.includes("Connexion") && !inside.includes("Cloison"), "another origin cannot frame the console (frame-ancestors 'none', X-Frame-Options DENY)");
} catch (err) {
  console.error(err.message || err);
  failures = failures || 1;
  if (p) {
    await p.screenshot({ path: `${SHOTS}/failure.png`, fullPage: true }).catch(() => {});
    console.error("page " + p.url() + ":\n" + (await text(p).catch(() => "")).slice(0, 3000));
  }
} finally {
  await browser.close();
}
console.log(`console-test: ${checks} checks, ${failures} failed`);
process.exit(failures ? 1 : 0);
