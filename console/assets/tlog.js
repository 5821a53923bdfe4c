// Client-side checks of the transparency log: the checkpoint's Ed25519
// signature (C2SP signed note) and an RFC 6962 / RFC 9162 inclusion proof,
// computed here with WebCrypto so the reader does not have to trust the
// server's word. Nothing in this file touches the DOM.

const enc = new TextEncoder();

export function b64decode(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function hex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

async function sha256(...parts) {
  let n = 0;
  for (const p of parts) n += p.length;
  const buf = new Uint8Array(n);
  let o = 0;
  for (const p of parts) { buf.set(p, o); o += p.length; }
  return new Uint8Array(await crypto.subtle.digest("SHA-256", buf));
}

export async function sha256Hex(text) {
  return hex(await sha256(enc.encode(text)));
}

function equal(a, b) {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let i = 0; i < a.length; i++) d |= a[i] ^ b[i];
  return d === 0;
}

// canonical is RFC 8785 (JSON Canonicalization Scheme) of a parsed JSON
// value: the ledger hashes payloads in this form (audit.Canonicalize), and
// JSON.stringify's strings and numbers are JCS's by design.
export function canonical(v) {
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  if (Array.isArray(v)) return "[" + v.map(canonical).join(",") + "]";
  const keys = Object.keys(v).sort(); // UTF-16 code unit order, as JCS sorts
  return "{" + keys.map((k) => JSON.stringify(k) + ":" + canonical(v[k])).join(",") + "}";
}

// parseVerifierKey splits a note verifier key name+hash+base64(alg ‖ key):
// alg 0x01 for a log's Ed25519 key, 0x04 for a witness's cosignature key.
export function parseVerifierKey(vkey, alg = 1) {
  const s = vkey.trim();
  const i = s.indexOf("+");
  const j = s.indexOf("+", i + 1);
  if (i <= 0 || j < 0) throw new Error("verifier key: not name+hash+key");
  const name = s.slice(0, i);
  const raw = b64decode(s.slice(j + 1));
  if (raw.length !== 33 || raw[0] !== alg) throw new Error("verifier key: not an Ed25519 " + (alg === 4 ? "cosignature" : "note") + " key");
  return { name, pub: raw.slice(1) };
}

async function keyHash(name, pub, alg = 1) {
  return (await sha256(enc.encode(name + "\n"), new Uint8Array([alg]), pub)).slice(0, 4);
}

// verifyCosignature checks a witness's cosignature/v1 line on the note
// (C2SP tlog-cosignature: key hash ‖ u64 time ‖ Ed25519 over
// "cosignature/v1\ntime T\n" + the note text). Returns {ok, reason, time}
// with time in seconds since 1970.
export async function verifyCosignature(parsed, name, pub) {
  const want = await keyHash(name, pub, 4);
  const sig = parsed.sigs.find((s) => s.name === name && s.blob.length === 76 && equal(s.blob.slice(0, 4), want));
  if (!sig) return { ok: false, reason: "no-signature" };
  const time = new DataView(sig.blob.buffer, sig.blob.byteOffset + 4, 8).getBigUint64(0);
  let key;
  try {
    key = await crypto.subtle.importKey("raw", pub, { name: "Ed25519" }, false, ["verify"]);
  } catch {
    return { ok: false, reason: "no-ed25519" };
  }
  const msg = enc.encode("cosignature/v1\ntime " + time.toString() + "\n" + parsed.text);
  const ok = await crypto.subtle.verify({ name: "Ed25519" }, key, sig.blob.slice(12), msg);
  return { ok, reason: ok ? "" : "bad-signature", time: Number(time) };
}

// parseNote splits a signed note into its text (what is signed), its
// checkpoint fields and its signature lines.
export function parseNote(note) {
  const k = note.indexOf("\n\n");
  if (k < 0) throw new Error("note: no signature block");
  const text = note.slice(0, k + 1);
  const lines = text.slice(0, -1).split("\n");
  if (lines.length < 3) throw new Error("note: not a checkpoint");
  const size = BigInt(lines[1]);
  const root = b64decode(lines[2]);
  const sigs = [];
  for (const line of note.slice(k + 2).split("\n")) {
    if (line === "") continue;
    const m = /^\u2014 (\S+) (\S+)$/.exec(line);
    if (!m) throw new Error("note: malformed signature line");
    sigs.push({ name: m[1], blob: b64decode(m[2]) });
  }
  return { text, origin: lines[0], size, root, sigs };
}

// ed25519Available: whether this browser's WebCrypto verifies Ed25519.
export async function ed25519Available() {
  try {
    await crypto.subtle.importKey("raw", new Uint8Array(32), { name: "Ed25519" }, false, ["verify"]);
    return true;
  } catch {
    return false;
  }
}

// verifyNote checks note's signature by the key named name with Ed25519
// public key pub. Returns {ok, reason}; reason "no-ed25519" when WebCrypto
// lacks Ed25519 (the caller says the signature was not checked).
export async function verifyNote(parsed, name, pub) {
  const want = await keyHash(name, pub);
  const sig = parsed.sigs.find((s) => s.name === name && s.blob.length === 68 && equal(s.blob.slice(0, 4), want));
  if (!sig) return { ok: false, reason: "no-signature" };
  let key;
  try {
    key = await crypto.subtle.importKey("raw", pub, { name: "Ed25519" }, false, ["verify"]);
  } catch {
    return { ok: false, reason: "no-ed25519" };
  }
  const ok = await crypto.subtle.verify({ name: "Ed25519" }, key, sig.blob.slice(4), enc.encode(parsed.text));
  return { ok, reason: ok ? "" : "bad-signature" };
}

// leafHash is RFC 6962's hash of a leaf: SHA-256(0x00 ‖ data).
export async function leafHash(data) {
  return sha256(new Uint8Array([0]), enc.encode(data));
}

// verifyInclusion checks an RFC 9162 (2.1.3.2) inclusion proof of the leaf
// with hash leaf at index (0-based) in a tree of size with root root.
export async function verifyInclusion(leaf, index, size, proof, root) {
  let fn = BigInt(index);
  let sn = BigInt(size) - 1n;
  if (fn > sn) return false;
  let r = leaf;
  for (const p of proof) {
    if (sn === 0n) return false;
    if ((fn & 1n) === 1n || fn === sn) {
      r = await sha256(new Uint8Array([1]), p, r);
      while ((fn & 1n) === 0n && fn !== 0n) { fn >>= 1n; sn >>= 1n; }
    } else {
      r = await sha256(new Uint8Array([1]), r, p);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  return sn === 0n && equal(r, root);
}
