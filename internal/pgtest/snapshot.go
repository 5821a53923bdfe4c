package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Snapshot copies db as a dump taken now would restore it (CREATE
// DATABASE … TEMPLATE; no session may be connected to db meanwhile), and
// drops the copy when tb ends: the database an operator rolls back to.
func Snapshot(tb testing.TB, db *DB) *DB {
	tb.Helper()
	ctx := context.Background()
	server, err := ServerURL()
	if err != nil {
		tb.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := fmt.Sprintf("cloison_t_dump_%d_%s", os.Getpid(), hex.EncodeToString(rnd[:]))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{db.Name}.Sanitize()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), server)
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			c.Close(context.Background())
		}
	})
	admin := WithDatabase(server, name)
	return &DB{Name: name, AdminURL: admin, RuntimeURL: AsRole(admin, db.Roles.Runtime), Roles: db.Roles}
}
