package main

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison/internal/pgtest"
)

// Behind PgBouncer in transaction mode, consecutive queries of
// one client connection run on different server connections, so a named
// prepared statement made on one is missing (or already exists) on the
// next; cloisond died at start with "prepared statement stmtcache_… already
// exists" (make ha-test, via pgbouncer). The server-side DEALLOCATE ALL
// below stands for that change of server connection: the default mode
// fails on it, --db-transaction-pooling does not (no named statements).
func TestTransactionPoolingNoNamedStatements(t *testing.T) {
	server, err := pgtest.ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	sep := "?"
	if strings.Contains(server, "?") {
		sep = "&"
	}
	ctx := context.Background()
	for _, tt := range []struct {
		name      string
		url       string
		txPooling bool
		wantErr   bool
	}{
		{"default: named statements", server, false, true},
		{"--db-transaction-pooling", server, true, false},
		{"--db-transaction-pooling keeps the URL's mode", server + sep + "default_query_exec_mode=cache_statement", true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := dbConfig{url: tt.url, txPooling: tt.txPooling}
			cfg, err := d.poolConfig()
			if err != nil {
				t.Fatal(err)
			}
			c, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			var n int
			const q = "SELECT count(*) FROM pg_roles WHERE rolname <> $1"
			if err := c.QueryRow(ctx, q, "x").Scan(&n); err != nil {
				t.Fatal(err)
			}
			// Another server connection: none of this one's statements.
			if _, err := c.Exec(ctx, "DEALLOCATE ALL", pgx.QueryExecModeSimpleProtocol); err != nil {
				t.Fatal(err)
			}
			err = c.QueryRow(ctx, q, "x").Scan(&n)
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Fatalf("the query after a change of server connection: error %v, want an error %v", err, tt.wantErr)
			}
		})
	}
}
