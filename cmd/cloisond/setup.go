package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cloison/cloison/engine/synth"
)

// builtinModel synthesizes the context-bag model under stateDir once.
func builtinModel(stateDir string) (string, error) {
	path := filepath.Join(stateDir, "models", "context-bag.gguf")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	w, err := synth.ContextBag(synth.BagConfig{})
	if err != nil {
		return "", err
	}
	tmp := path + ".tmp"
	if err := w.WriteFile(tmp); err != nil {
		return "", fmt.Errorf("built-in model: %w", err)
	}
	return path, os.Rename(tmp, path)
}

// ensureDatabase creates the database named in url when it does not exist,
// connecting to the same server's "postgres" database to do so. Nodes
// started at once serialize on an advisory lock there (per database name);
// a creator that is not one of them (or a server that reports the race as
// duplicate_database or a unique violation on pg_database) counts as
// success: the database exists.
func ensureDatabase(ctx context.Context, url string) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return err
	}
	name := cfg.Database
	if name == "" || name == "postgres" {
		return nil
	}
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background()) // the session's end releases the lock
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended('cloison.create_database:' || $1, 0))", name); err != nil {
		return err
	}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	if createdMeanwhile(err) {
		return nil
	}
	return err
}

// createdMeanwhile: CREATE DATABASE lost a race to another creator
// (duplicate_database, or unique_violation on pg_database's name index).
func createdMeanwhile(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505")
}
