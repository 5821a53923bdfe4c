package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/tenancy"
)

// The admin commands change tenancy only with their ledger event (an
// operator cannot change who may do what off the record): tenant create/update/suspend, API clients, token
// revocation and signing keys, as the runtime role; a rotation within the
// minimum interval is refused.
func TestCLITenancyLedgered(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t) // its own database: TestCLIEndToEnd counts the package's events
	dir := t.TempDir()
	if _, err := tenancy.LoadKEK(filepath.Join(dir, "signing.kek"), true); err != nil {
		t.Fatal(err)
	}
	rt := []string{"--database-url", db.AdminURL, "--role", db.Roles.Runtime, "--actor", "admin:cli-test"}
	keys := []string{"--kek-file", filepath.Join(dir, "signing.kek"), "--issuer", "cli-test-issuer"} // as a production deployment names it
	mustRun(t, append([]string{"tenant", "create", "clico", "--kv-pages", "16"}, rt...)...)
	if out := mustRun(t, append([]string{"tenant", "update", "clico", "--max-concurrent", "3", "--models", "m1,m2"}, rt...)...); !strings.Contains(out, `"max_concurrent":3`) || !strings.Contains(out, `"m2"`) {
		t.Errorf("update: %s", out)
	}
	if out := mustRun(t, append([]string{"tenant", "update", "clico", "--notice-deadline-hours", "24", "--incident-contact", "dpo@clico.example"}, rt...)...); !strings.Contains(out, `"notice_deadline_hours":24`) || !strings.Contains(out, `"incident_contact":"dpo@clico.example"`) {
		t.Errorf("notice clause update: %s", out)
	}
	if _, err := run(t, append([]string{"tenant", "update", "clico", "--notice-deadline-hours", "9000"}, rt...)...); err == nil {
		t.Error("notice deadline over a year: got nil, want a refusal")
	}
	if out := mustRun(t, append([]string{"tenant", "update", "clico", "--regions", "ca-qc,ca-on", "--node-tier", "dedicated"}, rt...)...); !strings.Contains(out, `"residency":{"regions":["ca-qc","ca-on"],"tier":"dedicated"}`) {
		t.Errorf("residency update: %s", out)
	}
	if _, err := run(t, append([]string{"tenant", "update", "clico", "--regions", "Québec"}, rt...)...); err == nil {
		t.Error("a malformed region: got nil, want a refusal")
	}
	mustRun(t, append([]string{"tenant", "suspend", "clico"}, rt...)...)
	mustRun(t, append([]string{"tenant", "activate", "clico"}, rt...)...)
	mustRun(t, append([]string{"tenant", "client", "create", "clico", "clico-app", "--scopes", "infer"}, rt...)...)
	if out := mustRun(t, append([]string{"tenant", "client", "revoke", "clico-app"}, rt...)...); !strings.Contains(out, "revoked") {
		t.Errorf("client revoke: %s", out)
	}
	tok := strings.TrimSpace(mustRun(t, append(append([]string{"token", "issue", "--tenant", "clico", "--subject", "someone"}, rt...), keys...)...))
	if out := mustRun(t, append([]string{"token", "revoke", "--token", tok}, rt...)...); !strings.Contains(out, "revoked") {
		t.Errorf("token revoke: %s", out)
	}
	if _, err := run(t, append(append([]string{"key", "rotate"}, rt...), keys...)...); err == nil || !strings.Contains(err.Error(), "too recently") {
		t.Errorf("quick rotation: got %v, want a refusal", err)
	}
	mustRun(t, append(append([]string{"key", "rotate", "--min-interval", "0s"}, rt...), keys...)...)
	ring := mustRun(t, append(append([]string{"key", "list"}, rt...), keys...)...)
	kid := ""
	for _, part := range strings.Split(ring, "},{") {
		if strings.Contains(part, `"state":"previous"`) {
			kid = strings.Split(strings.Split(part, `"kid":"`)[1], `"`)[0]
		}
	}
	if kid == "" {
		t.Fatalf("key list: no previous key in %s", ring)
	}
	// A thumbprint may begin with '-' (one in 64): after --, it is never read as a flag.
	mustRun(t, append(append(append([]string{"key", "retire"}, rt...), keys...), "--", kid)...)

	conn, err := pgx.Connect(ctx, db.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, kind := range []string{"tenant.created", "tenant.updated", "tenant.disabled", "client.created", "client.revoked",
		"token.revoked", "key.created", "key.rotated", "key.revoked"} {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE kind = $1 AND actor = 'admin:cli-test'`, kind).Scan(&n); err != nil || n == 0 {
			t.Errorf("ledger: got %d %s events by admin:cli-test (%v), want at least one", n, kind, err)
		}
	}
}
