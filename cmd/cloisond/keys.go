package main

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/keyfile"
	"github.com/cloison/cloison/tenancy"
)

// Secrets. The deployment's keys come from files or mounted secrets:
//
//   - --kek-file: the key-encryption key sealing the token signing keys;
//   - --log-key-file: the log (checkpoint) signing key, ONE for the whole
//     cluster: every node signs the shared ledger's checkpoints and tree
//     notes with it, so every node's verify accepts its peers' checkpoints;
//     --trust-log-key adds the public keys of earlier log keys;
//   - --cluster-key: the transfer manifest key (decode and prefill roles).
//
// Only --dev (make run, the e2e tests) creates a missing one under
// --state-dir; without it a missing flag stops the start with a message
// naming it. Each key's id (a public key's SHA-256 prefix, or a secret's
// fingerprint) is recorded at start in deployment_keys with its ledger event
// (key.created; key.rotated and key.revoked when --rotate-keys replaces the
// recorded one), so a node given another cluster's file is refused before it
// writes anything signed: see auditpg.Store.EnsureKey.
//
// Why one log key rather than a key per node recorded in the ledger: a
// key.created event is written with the runtime role's rights, so a
// verifier could not tell a node's key from one planted by whoever can
// write the ledger; the cluster's one log key is configured out of band on
// every node and verifier (cloisonctl audit verify --public-key), as the KEK is.
//
// Rotating the log key without a false alarm: first give every node
// --trust-log-key NEW.pub (a restart each), then start one node with
// --log-key-file NEW, --trust-log-key OLD.pub and --rotate-keys (it records
// key.rotated and key.revoked), then move the others to NEW; a node still
// on OLD is refused at its next start (ErrKeyRetired).
type keyConfig struct {
	dev        bool
	kekFile    string
	logKeyFile string
	trustLog   []string
	rotate     bool
}

func (k *keyConfig) flags(fs *flag.FlagSet) {
	fs.BoolVar(&k.dev, "dev", false, "development mode: keys whose file flag is unset are read from --state-dir and created there when missing (make run); without it --kek-file and --log-key-file (and --cluster-key for the decode and prefill roles) are required")
	fs.StringVar(&k.kekFile, "kek-file", "", "file (mode 0600/0400) holding the key-encryption key that seals the token signing keys (64 hex digits, e.g. openssl rand -hex 32; the same on every node)")
	fs.StringVar(&k.logKeyFile, "log-key-file", "", "file (mode 0600/0400) holding the Ed25519 log signing key that signs the ledger's checkpoints (cloisonctl audit keygen; the same on every node)")
	fs.Func("trust-log-key", "public key file (.pub) of an earlier log signing key whose checkpoints verify here (repeatable; needed to rotate the log key)", func(v string) error {
		k.trustLog = append(k.trustLog, v)
		return nil
	})
	fs.BoolVar(&k.rotate, "rotate-keys", false, "let this node's keys replace the ones the ledger records as current (key.rotated, the old key key.revoked); the old log key must be given to --trust-log-key")
}

// ErrMissingSecret: a production start (no --dev) without a key file.
var ErrMissingSecret = cloison.NewError(cloison.CodeInvalid, "a key file is not configured")

// check refuses a production start that lacks a key file, before anything
// is opened.
func (k *keyConfig) check(role string, clusterKey string) error {
	if k.dev {
		return nil
	}
	var missing []string
	if k.kekFile == "" && role != rolePrefill {
		missing = append(missing, "--kek-file")
	}
	if k.logKeyFile == "" && role != rolePrefill {
		missing = append(missing, "--log-key-file")
	}
	if clusterKey == "" && role != roleBoth {
		missing = append(missing, "--cluster-key")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %v: outside --dev every node reads its keys from files or mounted secrets and never creates them (cloisonctl audit keygen for the log key; make run passes --dev)", ErrMissingSecret, missing)
	}
	return nil
}

// devPath is the state-dir file a dev node uses for a key whose flag is
// unset ("" in production, where check refused it already).
func (k *keyConfig) devPath(flagValue, stateDir, name string) string {
	if flagValue != "" || !k.dev {
		return flagValue
	}
	return filepath.Join(stateDir, name)
}

// logKeys loads the log signing key (created under --state-dir in dev mode
// only) and the trusted public keys: its own and --trust-log-key's.
func (k *keyConfig) logKeys(stateDir string) (ed25519.PrivateKey, map[string]ed25519.PublicKey, error) {
	path := k.devPath(k.logKeyFile, stateDir, "checkpoint.key")
	var priv ed25519.PrivateKey
	var err error
	if k.logKeyFile == "" {
		priv, err = keyfile.PrivateOrCreate(path)
	} else {
		priv, err = keyfile.Private(path)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("--log-key-file: %w", err)
	}
	pubs := []ed25519.PublicKey{priv.Public().(ed25519.PublicKey)}
	for _, p := range k.trustLog {
		raw, err := keyfile.ReadPublic(p, ed25519.PublicKeySize)
		if err != nil {
			return nil, nil, fmt.Errorf("--trust-log-key: %w", err)
		}
		pubs = append(pubs, ed25519.PublicKey(raw))
	}
	return priv, audit.KeySet(pubs...), nil
}

// kek loads the key-encryption key (created under --state-dir in dev mode
// only).
func (k *keyConfig) kek(stateDir string) ([]byte, error) {
	kek, err := tenancy.LoadKEK(k.devPath(k.kekFile, stateDir, "signing.kek"), k.kekFile == "")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("--kek-file: %w", err)
	}
	return kek, err
}

// logKeyRecord, kekRecord and clusterKeyRecord name the keys in
// deployment_keys: never the secret, only a public key's digest or a
// domain-separated fingerprint of a secret.
func logKeyRecord(pub ed25519.PublicKey) audit.DeploymentKey { return audit.CheckpointKey(pub) }

func kekRecord(kek []byte) audit.DeploymentKey {
	fp := sha256.Sum256(append([]byte("cloison kek id\x00"), kek...))
	return audit.DeploymentKey{Purpose: audit.PurposeKEK, ID: "kek-" + hex.EncodeToString(fp[:8]), Digest: fp}
}

func clusterKeyRecord(secret []byte) audit.DeploymentKey {
	fp := sha256.Sum256(append([]byte("cloison cluster key id\x00"), secret...))
	return audit.DeploymentKey{Purpose: audit.PurposeCluster, ID: "ck-" + hex.EncodeToString(fp[:8]), Digest: fp}
}

// explain wraps a refusal of CheckKey or EnsureKey with what the operator
// should do.
func explain(key audit.DeploymentKey, err error) error {
	if errors.Is(err, audit.ErrKeyMismatch) {
		hint := map[audit.Name]string{
			audit.PurposeKEK:        "give every node the same --kek-file (a KEK cannot be rotated by a restart)",
			audit.PurposeCheckpoint: "give every node the same --log-key-file; to rotate it, start with --rotate-keys and the old public key in --trust-log-key",
			audit.PurposeCluster:    "give every node the same --cluster-key; to rotate it, start with --rotate-keys",
		}[key.Purpose]
		return fmt.Errorf("%s key: %w: %s", key.Purpose, err, hint)
	}
	return fmt.Errorf("%s key: %w", key.Purpose, err)
}
