// A minimal OpenID Connect provider for make console-test: an Ed25519 key
// (its JWKS at /jwks), an authorization endpoint that signs in one fixed
// person at once (no login form) and a token endpoint that checks the
// authorization code flow with PKCE as a provider must: the code is used
// once, for the client and redirect URI it was issued to, and only with the
// verifier whose S256 challenge came with it. Test tool only.
// Writes "host:port" to the file named by IDP_READY once listening.
import http from "node:http";
import crypto from "node:crypto";
import { writeFileSync } from "node:fs";

const { publicKey, privateKey } = crypto.generateKeyPairSync("ed25519");
const jwk = { ...publicKey.export({ format: "jwk" }), kid: "console-idp-1", alg: "EdDSA", use: "sig" };
const codes = new Map(); // code → {client_id, redirect_uri, challenge}
const b64u = (b) => Buffer.from(b).toString("base64url");
let issuer = "";
const claims = { sub: process.env.IDP_SUBJECT || "officer-oidc", tenant: process.env.IDP_TENANT || "dev", scope: process.env.IDP_SCOPE || "openid admin compliance:read compliance:write" };

function jwt() {
  const now = Math.floor(Date.now() / 1000);
  const head = b64u(JSON.stringify({ alg: "EdDSA", typ: "JWT", kid: jwk.kid }));
  const body = b64u(JSON.stringify({ iss: issuer, aud: "cloison", iat: now, exp: now + 3600, ...claims }));
  return head + "." + body + "." + b64u(crypto.sign(null, Buffer.from(head + "." + body), privateKey));
}

function json(res, status, v, origin) {
  const h = { "Content-Type": "application/json", "Cache-Control": "no-store" };
  if (origin) h["Access-Control-Allow-Origin"] = origin;
  res.writeHead(status, h);
  res.end(JSON.stringify(v));
}

const srv = http.createServer((req, res) => {
  const u = new URL(req.url, issuer);
  if (req.method === "GET" && u.pathname === "/jwks") return json(res, 200, { keys: [jwk] });
  if (req.method === "GET" && u.pathname === "/authorize") {
    const q = u.searchParams;
    if (q.get("response_type") !== "code" || q.get("code_challenge_method") !== "S256" || !q.get("code_challenge") || !q.get("client_id") || !q.get("redirect_uri")) {
      res.writeHead(400); return res.end("bad authorization request");
    }
    const code = b64u(crypto.randomBytes(16));
    codes.set(code, { client_id: q.get("client_id"), redirect_uri: q.get("redirect_uri"), challenge: q.get("code_challenge") });
    const back = new URL(q.get("redirect_uri"));
    back.searchParams.set("code", code);
    back.searchParams.set("state", q.get("state") || "");
    res.writeHead(302, { Location: back.toString() });
    return res.end();
  }
  if (req.method === "POST" && u.pathname === "/token") {
    const origin = req.headers.origin;
    let body = "";
    req.on("data", (c) => { body += c; });
    req.on("end", () => {
      const p = new URLSearchParams(body);
      const c = codes.get(p.get("code"));
      codes.delete(p.get("code"));
      const verifier = p.get("code_verifier") || "";
      if (!c || p.get("grant_type") !== "authorization_code" || c.client_id !== p.get("client_id") || c.redirect_uri !== p.get("redirect_uri") ||
        b64u(crypto.createHash("sha256").update(verifier).digest()) !== c.challenge) {
        return json(res, 400, { error: "invalid_grant" }, origin);
      }
      json(res, 200, { access_token: jwt(), token_type: "Bearer", expires_in: 3600 }, origin);
    });
    return;
  }
  res.writeHead(404);
  res.end();
});
srv.listen(0, "127.0.0.1", () => {
  const a = srv.address();
  issuer = `http://127.0.0.1:${a.port}`;
  writeFileSync(process.env.IDP_READY, `127.0.0.1:${a.port}`);
});
