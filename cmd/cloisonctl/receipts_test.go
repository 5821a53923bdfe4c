package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/witness"
	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// cutTail deletes every ledger entry after seq n, and everything derived
// from them (tree, tree notes, checkpoints, tenant logs and the tenant
// checkpoints served over them), as the database owner with the
// append-only triggers off: a DBA without the log key cutting the tail
// after the last checkpoint it leaves standing.
func cutTail(t *testing.T, p *platformtest.Platform, n uint64) {
	t.Helper()
	ctx := context.Background()
	admin := p.DB.AdminPool(t)
	err := pgx.BeginFunc(ctx, admin, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET ROLE "+p.DB.Roles.Owner); err != nil {
			return err
		}
		stmts := []string{}
		for _, tb := range []string{"audit_events", "audit_checkpoints", "tlog_hashes", "tlog_tiles", "tlog_checkpoints", "tlog_frontier",
			"tenant_log_entries", "tenant_log_hashes", "tenant_log_indexed", "tenant_checkpoints", "request_entries"} {
			stmts = append(stmts, "ALTER TABLE "+tb+" DISABLE TRIGGER USER")
		}
		// Each tenant log keeps the positions of entries up to n.
		rows, err := tx.Query(ctx, "SELECT tenant, count(*) FILTER (WHERE seq <= $1) FROM tenant_log_entries GROUP BY tenant", int64(n))
		if err != nil {
			return err
		}
		kept := map[string]int64{}
		for rows.Next() {
			var tn string
			var c int64
			if err := rows.Scan(&tn, &c); err != nil {
				return err
			}
			kept[tn] = c
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for tn, c := range kept {
			stmts = append(stmts,
				fmt.Sprintf("DELETE FROM tenant_log_hashes WHERE tenant = '%s' AND index >= %d", tn, tlog.StoredHashCount(c)),
				fmt.Sprintf("DELETE FROM tenant_checkpoints WHERE tenant = '%s' AND size > %d", tn, c))
		}
		stmts = append(stmts,
			fmt.Sprintf("DELETE FROM audit_events WHERE seq > %d", n),
			fmt.Sprintf("DELETE FROM audit_checkpoints WHERE size > %d", n),
			fmt.Sprintf("DELETE FROM tlog_checkpoints WHERE size > %d", n),
			fmt.Sprintf("DELETE FROM tlog_hashes WHERE index >= %d", tlog.StoredHashCount(int64(n))),
			fmt.Sprintf("DELETE FROM tlog_frontier WHERE size > %d", n),
			fmt.Sprintf("DELETE FROM tenant_log_entries WHERE seq > %d", n),
			fmt.Sprintf("DELETE FROM request_entries WHERE seq > %d", n),
			fmt.Sprintf("DELETE FROM tenant_log_indexed WHERE seq > %d", n),
			fmt.Sprintf("INSERT INTO tenant_log_indexed (seq) VALUES (%d) ON CONFLICT DO NOTHING", n))
		stmts = append(stmts, pgtest.TruncateTreeSQL(int64(n))...)
		for _, q := range stmts {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCLIVerifyReceiptsNamesCutTail: requests acknowledged with receipts,
// then the tail after the last checkpoint cut by the DBA (the entries,
// their tree, notes and tenant logs). The ledger verifies without the
// receipts — nothing in the database remembers the cut — but `audit
// verify --receipts` (on the database, from the server's global log, and
// the tenant's own check with --server --tenant) fails with exit status 3 naming every cut request
// and its leaf hash; before the cut the same receipts are all included,
// and before their deadline a missing entry is pending, not a failure.
func TestCLIVerifyReceiptsNamesCutTail(t *testing.T) {
	ctx := context.Background()
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"alpha"}})
	dir := t.TempDir()
	vkey, err := p.Ledger.TreeVerifierKey()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(strings.SplitN(vkey, "+", 3)[2])
	pubFile := filepath.Join(dir, "log.pub")
	if err := os.WriteFile(pubFile, []byte(base64.StdEncoding.EncodeToString(raw[1:])+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	appendEvents(t, p.Ledger, "before", 1, 5)
	if _, err := p.Ledger.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	last, err := p.Ledger.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}

	tok := "Bearer " + p.Token(t, "alpha", tenancy.ScopeInfer)
	var receipts, ids []string
	for range 3 {
		resp, b := httpPost(t, p.URL+"/v1/chat/completions", tok,
			`{"model":"`+platformtest.Model+`","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`)
		if resp.StatusCode != 200 || resp.Header.Get(api.ReceiptHeader) == "" {
			t.Fatalf("chat: %d %s, receipt %q", resp.StatusCode, b, resp.Header.Get(api.ReceiptHeader))
		}
		receipts = append(receipts, resp.Header.Get(api.ReceiptHeader))
		ids = append(ids, resp.Header.Get("X-Request-Id"))
	}
	file := filepath.Join(dir, "receipts")
	if err := os.WriteFile(file, []byte(strings.Join(receipts, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Ledger.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	dbArgs := []string{"audit", "verify", "--database-url", p.DB.AdminURL, "--role", p.DB.Roles.Runtime, "--origin", "platformtest",
		"--public-key", pubFile, "--no-register"}
	tenantArgs := []string{"audit", "verify", "--server", p.URL, "--token", p.Token(t, "alpha", tenancy.ScopeComplianceRead),
		"--verifier-key", vkey, "--tenant", "alpha", "--receipts", file}
	if out := mustRun(t, append(dbArgs, "--receipts", file)...); !strings.Contains(out, "3 included, 0 pending") {
		t.Fatalf("before the cut, database: %s", out)
	}
	globalArgs := []string{"audit", "verify", "--server", p.URL, "--token", p.Token(t, "alpha", tenancy.ScopeComplianceRead, tenancy.ScopeAdmin),
		"--verifier-key", vkey, "--receipts", file}
	for name, args := range map[string][]string{"tenant": tenantArgs, "global": globalArgs} {
		if out := mustRun(t, args...); !strings.Contains(out, "3 included, 0 pending") {
			t.Fatalf("before the cut, %s: %s", name, out)
		}
	}

	cutTail(t, p, last.Seq)
	mustRun(t, dbArgs...) // the database alone shows nothing
	// Not yet due: pending, listed, no failure.
	if out := mustRun(t, append(dbArgs, "--receipts", file)...); !strings.Contains(out, "0 included, 3 pending") {
		t.Fatalf("cut, not yet due: %s", out)
	}
	defer func(c func() time.Time) { clock = c }(clock)
	clock = func() time.Time { return time.Now().Add(audit.MaxMergeDelay + time.Minute) }
	for name, args := range map[string][]string{"database": append(dbArgs, "--receipts", file), "tenant": tenantArgs, "global": globalArgs} {
		_, err := run(t, args...)
		if name != "database" && cloison.ErrorCode(err) == cloison.CodeUnavailable && strings.Contains(err.Error(), "checkpoint: 503") {
			// The node itself refuses to sign a head over the cut log (it
			// contradicts the tree it signed before: audit/postgres
			// sign.go): the verifier gets no checkpoint that could hide
			// the cut. The database run, which reads the stored notes,
			// names the receipts.
			continue
		}
		var re *audit.ReceiptsError
		if !errors.Is(err, audit.ErrReceiptBroken) || exitCode(err) != 3 || !errors.As(err, &re) || len(re.Missing) != 3 {
			t.Fatalf("%s after the cut: got %v (exit %d), want the 3 receipts named, exit 3", name, err, exitCode(err))
		}
		for i, id := range ids {
			r, _ := audit.OpenReceipt(receipts[i], vkey)
			leaf := base64.StdEncoding.EncodeToString(r.Leaf[:])
			if !strings.Contains(err.Error(), "request "+id) || !strings.Contains(err.Error(), leaf) {
				t.Errorf("%s: %v does not name request %s and leaf %s", name, err, id, leaf)
			}
		}
	}
}

func httpPost(t *testing.T, url, auth, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestCLIVerifyReceiptsWitnessed: with --witnesses K a receipt's entry
// counts only once it is under a checkpoint K witnesses cosigned — a
// signed tree note the witnesses never saw does not keep the promise —
// from the server and on the database.
func TestCLIVerifyReceiptsWitnessed(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"alpha"}})
	dir := t.TempDir()
	logVKey, err := p.Ledger.TreeVerifierKey()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(strings.SplitN(logVKey, "+", 3)[2])
	pubFile := filepath.Join(dir, "log.pub")
	if err := os.WriteFile(pubFile, []byte(base64.StdEncoding.EncodeToString(raw[1:])+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wKey, ready := filepath.Join(dir, "w.key"), filepath.Join(dir, "ready")
	wvkey := strings.TrimSpace(mustRun(t, "witness", "vkey", "--create", "--key", wKey, "--name", "witness.test/rcpt"))
	addr, served := startWitness(ctx, t, wKey, filepath.Join(dir, "state.json"), "witness.test/rcpt", logVKey, ready)
	appendEvents(t, p.Ledger, "before", 1, 4)
	if _, err := p.Ledger.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := witness.NewClient("http://"+addr, wvkey, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := witness.NewSubmitter(ctx, p.Ledger, logVKey, []*witness.Client{c}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if errs := sub.SubmitLatest(ctx); errs[0] != nil {
		t.Fatal(errs[0])
	}

	resp, b := httpPost(t, p.URL+"/v1/chat/completions", "Bearer "+p.Token(t, "alpha", tenancy.ScopeInfer),
		`{"model":"`+platformtest.Model+`","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`)
	if resp.StatusCode != 200 {
		t.Fatalf("chat: %d %s", resp.StatusCode, b)
	}
	file := filepath.Join(dir, "receipts")
	if err := os.WriteFile(file, []byte(resp.Header.Get(api.ReceiptHeader)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Ledger.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	defer func(c func() time.Time) { clock = c }(clock)
	clock = func() time.Time { return time.Now().Add(audit.MaxMergeDelay + time.Minute) }
	server := []string{"audit", "verify", "--server", p.URL, "--token", p.Token(t, "alpha", tenancy.ScopeComplianceRead, tenancy.ScopeAdmin),
		"--verifier-key", logVKey, "--receipts", file, "--witness-key", wvkey, "--witnesses", "1", "--max-cosignature-age", "10m"}
	db := []string{"audit", "verify", "--database-url", p.DB.AdminURL, "--role", p.DB.Roles.Runtime, "--origin", "platformtest",
		"--public-key", pubFile, "--no-register", "--receipts", file, "--witness-key", wvkey, "--witnesses", "1", "--max-cosignature-age", "10m"}
	for name, args := range map[string][]string{"server": server, "database": db} {
		if _, err := run(t, args...); !errors.Is(err, audit.ErrReceiptBroken) {
			t.Errorf("%s, signed but not cosigned: got %v, want ErrReceiptBroken", name, err)
		}
	}
	if errs := sub.SubmitLatest(ctx); errs[0] != nil {
		t.Fatal(errs[0])
	}
	for name, args := range map[string][]string{"server": server, "database": db} {
		if out := mustRun(t, args...); !strings.Contains(out, "1 included, 0 pending") {
			t.Errorf("%s, cosigned: %s", name, out)
		}
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("witness: %v", err)
	}
}
