package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// asSuperuser runs stmts with the ledger's append-only triggers off, as
// the cluster superuser: the strongest attacker short of holding the key.
func asSuperuser(t *testing.T, admin *pgxpool.Pool, stmts ...string) {
	t.Helper()
	tables := []string{"audit_events", "audit_checkpoints", "tlog_hashes", "tlog_tiles", "tlog_checkpoints"}
	var all []string
	for _, tb := range tables {
		all = append(all, "ALTER TABLE "+tb+" DISABLE TRIGGER USER")
	}
	all = append(all, stmts...)
	for _, tr := range [][2]string{{"audit_events", "audit_events_append_only"}, {"audit_events", "audit_events_chain"},
		{"audit_events", "audit_events_tlog"}, {"audit_checkpoints", "audit_checkpoints_append_only"},
		{"tlog_hashes", "tlog_hashes_append_only"}, {"tlog_hashes", "tlog_hashes_dense"},
		{"tlog_tiles", "tlog_tiles_append_only"}, {"tlog_tiles", "tlog_tiles_extend"}, {"tlog_checkpoints", "tlog_checkpoints_append_only"}} {
		all = append(all, fmt.Sprintf("ALTER TABLE %s ENABLE ALWAYS TRIGGER %s", tr[0], tr[1]))
	}
	for _, q := range all {
		if _, err := admin.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func appendEvents(t *testing.T, s *postgres.Store, actor string, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		if _, err := s.Append(context.Background(), audit.Event{OccurredAt: time.Now(), Tenant: "alpha", Actor: audit.Name(actor),
			Payload: audit.RequestCompleted{Request: cloison.RequestID(fmt.Sprintf("%s-%d", actor, i)), Model: "m",
				PromptTokens: int64(i), CompletionTokens: 1, Pages: 1, Tier: "cross-tenant"}}); err != nil {
			t.Fatal(err)
		}
	}
}

// An operator who rewrites the ledger is caught by a verifier that kept
// state: `audit verify --trusted` — from a server (--server) and on
// the database — keeps the last verified checkpoint and fails, with exit
// status 3 and the reason named, on each tamper kind done as the database
// superuser: the tail deleted after the last checkpoint; every checkpoint
// deleted and the chain rewritten; the same re-signed by the server's key;
// the ledger emptied (there the server already refuses the verifier's
// tenant, whose record went with the ledger).
func TestCLIVerifyTrustedDetectsTampering(t *testing.T) {
	tests := []struct {
		name         string
		tamper       func(t *testing.T, p *platformtest.Platform, size int)
		server, db   error
		serverReason string
	}{
		{"tail deleted after the last checkpoint", func(t *testing.T, p *platformtest.Platform, size int) {
			asSuperuser(t, p.DB.AdminPool(t), append([]string{fmt.Sprintf("DELETE FROM audit_events WHERE seq > %d", size-10),
				fmt.Sprintf("DELETE FROM tlog_checkpoints WHERE size > %d", size-10),
				fmt.Sprintf("DELETE FROM audit_checkpoints WHERE size > %d", size-10)}, pgtest.TruncateTreeSQL(int64(size-10))...)...)
		}, audit.ErrSmallerTree, audit.ErrSmallerTree, "smaller"},
		{"checkpoints deleted and chain rewritten", func(t *testing.T, p *platformtest.Platform, size int) {
			rewrite(t, p, size)
		}, audit.ErrNoCheckpoint, audit.ErrFork, "no signed checkpoint"},
		// The server refuses to sign what contradicts the tree it signed,
		// and serves no checkpoint after that (503, exit 1): the verifier
		// cannot be shown the rewritten tree under the key.
		{"chain rewritten and the server asked to re-sign it", func(t *testing.T, p *platformtest.Platform, size int) {
			rewrite(t, p, size)
			if _, err := p.Ledger.SignTree(context.Background()); !errors.Is(err, postgres.ErrSigningRefused) || !errors.Is(err, audit.ErrFork) {
				t.Fatalf("the server signed the rewritten tree: %v", err)
			}
		}, nil, audit.ErrFork, "503"},
		{"ledger emptied", func(t *testing.T, p *platformtest.Platform, _ int) {
			asSuperuser(t, p.DB.AdminPool(t), "DELETE FROM audit_events", "DELETE FROM tlog_tiles", "DELETE FROM tlog_checkpoints", "DELETE FROM audit_checkpoints")
			// The tenant's own record went with the ledger: the server
			// refuses the verifier's tenant (503); the database run names
			// the emptied ledger (or, once the node appended again, the
			// tree smaller than the trusted checkpoint and the live rows
			// whose events are gone).
		}, nil, audit.ErrEmptyLedger, "cannot be proven against the ledger"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"alpha"}})
			dir := t.TempDir()
			vkey, err := p.Ledger.TreeVerifierKey()
			if err != nil {
				t.Fatal(err)
			}
			keyFile, pubFile := filepath.Join(dir, "log.vkey"), filepath.Join(dir, "log.pub")
			raw, _ := base64.StdEncoding.DecodeString(strings.SplitN(vkey, "+", 3)[2]) // name+hash+base64(alg ‖ key)
			if err := os.WriteFile(keyFile, []byte(vkey+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(pubFile, []byte(base64.StdEncoding.EncodeToString(raw[1:])+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			token := p.Token(t, "alpha", tenancy.ScopeComplianceRead, tenancy.ScopeAdmin)
			serverArgs := []string{"audit", "verify", "--server", p.URL, "--token", token, "--verifier-key", keyFile,
				"--trusted", filepath.Join(dir, "server.trusted")}
			dbArgs := []string{"audit", "verify", "--database-url", p.DB.AdminURL, "--role", p.DB.Roles.Runtime, "--origin", "platformtest",
				"--public-key", pubFile, "--no-register", "--trusted", filepath.Join(dir, "db.trusted")}

			appendEvents(t, p.Ledger, "honest", 1, 20)
			if _, err := p.Ledger.SignTree(ctx); err != nil {
				t.Fatal(err)
			}
			if out := mustRun(t, serverArgs...); !strings.Contains(out, "first use") {
				t.Errorf("first run: %s", out)
			}
			mustRun(t, dbArgs...)
			appendEvents(t, p.Ledger, "honest", 21, 40)
			if _, err := p.Ledger.SignTree(ctx); err != nil {
				t.Fatal(err)
			}
			h, err := p.Ledger.Head(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if out := mustRun(t, append(serverArgs, "--entry", "3", "--entry", fmt.Sprint(h.Seq))...); !strings.Contains(out, "consistent with the trusted checkpoint") || !strings.Contains(out, "entry 3 included") {
				t.Errorf("second run: %s", out)
			}
			if out := mustRun(t, dbArgs...); !strings.Contains(out, fmt.Sprintf("%d events verified", h.Seq)) {
				t.Errorf("db run: %s", out)
			}

			tc.tamper(t, p, int(h.Seq))
			// tc.server nil: the server refuses to answer (503).
			serverFailed := func(err error) bool {
				if tc.server == nil {
					return cloison.ErrorCode(err) == cloison.CodeUnavailable && strings.Contains(err.Error(), tc.serverReason)
				}
				return errors.Is(err, tc.server) && exitCode(err) == 3 && strings.Contains(err.Error(), tc.serverReason)
			}
			_, err = run(t, serverArgs...)
			if !serverFailed(err) {
				t.Errorf("--server: got %v (exit %d), want %v (%s)", err, exitCode(err), tc.server, tc.serverReason)
			}
			_, err = run(t, dbArgs...)
			refilled := tc.db == audit.ErrEmptyLedger && errors.Is(err, audit.ErrSmallerTree)
			if !(errors.Is(err, tc.db) || refilled) || exitCode(err) != 3 {
				t.Errorf("database: got %v (exit %d), want %v, exit 3", err, exitCode(err), tc.db)
			}
			// A failure leaves the trusted state as it was: the next run
			// fails again rather than trusting the tampered log.
			if _, err := run(t, serverArgs...); !serverFailed(err) {
				t.Errorf("--server again: got %v, want %v", err, tc.server)
			}
		})
	}
}

// rewrite replaces the ledger after its 9th entry by other entries up to
// size, with every checkpoint and tree note deleted, as the superuser: a
// keyless store then rebuilds the tree (Open) and appends the forgeries.
func rewrite(t *testing.T, p *platformtest.Platform, size int) {
	t.Helper()
	asSuperuser(t, p.DB.AdminPool(t), "DELETE FROM audit_events WHERE seq > 9", "DELETE FROM tlog_tiles",
		"DELETE FROM tlog_checkpoints", "DELETE FROM audit_checkpoints")
	forger, err := postgres.Open(context.Background(), p.DB.AdminPool(t), postgres.Config{Origin: "platformtest"})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, forger, "forged", 10, size)
	if err := forger.Close(); err != nil {
		t.Fatal(err)
	}
}

// A tenant verifies its own log with its own token: first use, then a
// consistency proof from its trusted tenant checkpoint; another tenant's
// log is refused.
func TestCLIVerifyTenantLog(t *testing.T) {
	ctx := context.Background()
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"alpha", "bravo"}})
	dir := t.TempDir()
	vkey, _ := p.Ledger.TreeVerifierKey()
	token := p.Token(t, "alpha", tenancy.ScopeComplianceRead)
	args := []string{"audit", "verify", "--server", p.URL, "--token", token, "--verifier-key", vkey, "--tenant", "alpha",
		"--trusted", filepath.Join(dir, "alpha.trusted")}
	appendEvents(t, p.Ledger, "a", 1, 5)
	if out := mustRun(t, args...); !strings.Contains(out, "platformtest/tenant/alpha") || !strings.Contains(out, "first use") {
		t.Errorf("first run: %s", out)
	}
	appendEvents(t, p.Ledger, "b", 6, 9)
	if out := mustRun(t, append(args, "--entry", "1", "--entry", "2")...); !strings.Contains(out, "consistent with the trusted checkpoint") || !strings.Contains(out, "entry 2 included") {
		t.Errorf("second run: %s", out)
	}
	other := []string{"audit", "verify", "--server", p.URL, "--token", token, "--verifier-key", vkey, "--tenant", "bravo"}
	if _, err := run(t, other...); cloison.ErrorCode(err) != cloison.CodePermissionDenied {
		t.Errorf("bravo's log with alpha's token: got %v, want permission denied", err)
	}
	_ = ctx
}

// sharedIncident appends, after alpha's and bravo's own traffic, an
// isolation violation of bravo's request that affects alpha too, the
// incident it opens and a notice to alpha.
func sharedIncident(t *testing.T, p *platformtest.Platform) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	both := []cloison.TenantID{"bravo", "alpha"}
	viol, err := p.Ledger.Append(ctx, audit.Event{OccurredAt: now, Tenant: "bravo", Actor: "engine:n1", Payload: audit.IsolationViolation{
		Request: "req-bravo-1", Invariant: "ownership-tag", AffectedTenants: both, AffectedRequests: []cloison.RequestID{"req-bravo-1"}, WithheldResponses: 1}})
	if err != nil {
		t.Fatal(err)
	}
	id, err := p.Ledger.OpenFromDetection(ctx, "engine:n1", audit.Detection{Source: audit.SourceIsolationViolation, Invariant: "ownership-tag",
		DetectedAt: now, AffectedTenants: both, AffectedRequests: []cloison.RequestID{"req-bravo-1"}, AffectedResponses: 1, LedgerEvents: []int64{int64(viol.Seq)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Ledger.AddNotice(ctx, "admin:test", audit.Notice{Incident: id, Recipient: audit.RecipientTenant, Tenant: "alpha",
		RecipientName: "alpha DPO", SentAt: now, Method: "e-mail"}); err != nil {
		t.Fatal(err)
	}
}

// `audit log --tenant` lists a tenant's log by the positions `audit verify
// --tenant --entry` takes, the shared incident included (redacted), and
// checks every row against the signed tenant checkpoint: the whole log by
// its recomputed root, a part by inclusion proofs. A server that lists
// other bytes, or renumbers its rows (as a listing that dropped the
// incident rows once did), fails with exit status 3.
func TestCLIAuditLogTenant(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"alpha", "bravo"}})
	vkey, _ := p.Ledger.TreeVerifierKey()
	token := p.Token(t, "alpha", tenancy.ScopeComplianceRead)
	appendEvents(t, p.Ledger, "a", 1, 4)
	for i := 0; i < 5; i++ {
		if _, err := p.Ledger.Append(context.Background(), audit.Event{OccurredAt: time.Now(), Tenant: "bravo", Actor: "engine:n1",
			Payload: audit.RequestCompleted{Request: cloison.RequestID(fmt.Sprintf("req-bravo-%d", i)), Model: "m", PromptTokens: 1,
				CompletionTokens: 1, Pages: 1, Tier: "cross-tenant"}}); err != nil {
			t.Fatal(err)
		}
	}
	sharedIncident(t, p)
	appendEvents(t, p.Ledger, "b", 5, 6)
	logArgs := func(server string, extra ...string) []string {
		return append([]string{"audit", "log", "--server", server, "--token", token, "--verifier-key", vkey, "--tenant", "alpha"}, extra...)
	}
	out := mustRun(t, logArgs(p.URL)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// tenant.created, 6 requests, the violation, the incident, the notice.
	const size = 1 + 6 + 3
	if len(lines) != size+1 || !strings.Contains(lines[size], fmt.Sprintf("size %d", size)) || !strings.Contains(lines[size], "recomputed") {
		t.Fatalf("got:\n%s\nwant %d rows and the recomputed root", out, size)
	}
	if strings.Contains(out, "bravo") {
		t.Errorf("alpha's listing names bravo:\n%s", out)
	}
	incident := 0
	for i, line := range lines[:size] {
		if !strings.HasPrefix(line, fmt.Sprintf("%d\t", i+1)) {
			t.Errorf("row %d: %q does not start with its position", i+1, line)
		}
		if strings.Contains(line, "incident.opened (redacted: 1 other tenants)") {
			incident = i + 1
		}
	}
	if incident == 0 {
		t.Fatalf("no redacted incident row:\n%s", out)
	}
	// The same position is the incident for `audit verify --tenant --entry`.
	vout := mustRun(t, "audit", "verify", "--server", p.URL, "--token", token, "--verifier-key", vkey, "--tenant", "alpha", "--entry", strconv.Itoa(incident))
	if !strings.Contains(vout, fmt.Sprintf("entry %d included", incident)) {
		t.Errorf("verify --entry %d: %s", incident, vout)
	}
	part := mustRun(t, logArgs(p.URL, "--from", "2", "--to", "4")...)
	if n := strings.Count(part, "\n"); n != 4 || !strings.HasPrefix(part, "2\t") || !strings.Contains(part, "3 inclusion proofs verified") {
		t.Errorf("--from 2 --to 4:\n%s", part)
	}

	// A lying server between the client and cloisond.
	for _, tc := range []struct {
		name  string
		lie   func(rows []string) []string
		extra []string
	}{
		{"two rows' payloads swapped", swapPayloads, nil},
		{"two rows' payloads swapped, a part", swapPayloads, []string{"--from", "2", "--to", "3"}},
		{"incident rows dropped and renumbered", func(rows []string) []string {
			var out []string
			for _, r := range rows {
				if !strings.Contains(r, `"view"`) && !strings.Contains(r, "notice.sent") {
					out = append(out, r)
				}
			}
			for i := range out {
				out[i] = regexp.MustCompile(`^\{"seq":\d+`).ReplaceAllString(out[i], fmt.Sprintf(`{"seq":%d`, i+1))
			}
			return out
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target, _ := url.Parse(p.URL)
			proxy := httputil.NewSingleHostReverseProxy(target)
			proxy.ModifyResponse = func(r *http.Response) error {
				if r.Request.URL.Path != "/compliance/v1/ledger" {
					return nil
				}
				b, err := io.ReadAll(r.Body)
				if err != nil {
					return err
				}
				rows := tc.lie(strings.Split(strings.TrimRight(string(b), "\n"), "\n"))
				nb := []byte(strings.Join(rows, "\n") + "\n")
				r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(nb)), int64(len(nb))
				r.Header.Del("Content-Length")
				return nil
			}
			srv := httptest.NewServer(proxy)
			defer srv.Close()
			_, err := run(t, logArgs(srv.URL, tc.extra...)...)
			if exitCode(err) != 3 {
				t.Errorf("got %v (exit %d), want exit 3", err, exitCode(err))
			}
		})
	}
}

// swapPayloads exchanges the payloads of the first two rows, positions
// kept.
func swapPayloads(rows []string) []string {
	if len(rows) < 2 {
		return rows
	}
	split := func(r string) (string, string) {
		i := strings.Index(r, `"payload":`)
		return r[:i], r[i:]
	}
	h0, p0 := split(rows[0])
	h1, p1 := split(rows[1])
	rows[0], rows[1] = h0+p1, h1+p0
	return rows
}

// `audit verify --server` without --entry checks every entry, not only the
// last: a row deleted from the middle of the ledger (triggers off), which
// the last entry's inclusion proof (read from the stored tiles) never
// touches, fails with exit status 3; --entry still checks only the
// entries named.
func TestCLIVerifyServerChecksEveryEntry(t *testing.T) {
	ctx := context.Background()
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"alpha"}})
	vkey, err := p.Ledger.TreeVerifierKey()
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, p.Ledger, "honest", 1, 30)
	if _, err := p.Ledger.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	token := p.Token(t, "alpha", tenancy.ScopeComplianceRead, tenancy.ScopeAdmin)
	args := []string{"audit", "verify", "--server", p.URL, "--token", token, "--verifier-key", vkey}
	h, err := p.Ledger.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, args...); !strings.Contains(out, fmt.Sprintf("all %d entries listed", h.Seq)) {
		t.Fatalf("healthy ledger: %s", out)
	}
	asSuperuser(t, p.DB.AdminPool(t), "DELETE FROM audit_events WHERE seq = 12")
	if _, err := run(t, args...); !errors.Is(err, audit.ErrNotIncluded) || exitCode(err) != 3 {
		t.Errorf("row 12 deleted: got %v (exit %d), want ErrNotIncluded, exit 3", err, exitCode(err))
	}
	if out := mustRun(t, append(args, "--entry", fmt.Sprint(h.Seq))...); !strings.Contains(out, fmt.Sprintf("entry %d included", h.Seq)) {
		t.Errorf("--entry %d: %s", h.Seq, out)
	}
}
