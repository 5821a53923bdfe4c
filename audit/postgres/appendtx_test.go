package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
)

// AppendTx shares the chain with the group-commit writer: appends inside
// callers' transactions (committed or rolled back) interleaved with queued
// Appends leave one gap-free chain that verifies, holding exactly the
// committed events.
func TestAppendTxInterleavesWithGroupCommit(t *testing.T) {
	const writers, perWriter = 8, 40
	ctx := context.Background()
	pool := pgtest.New(t).RuntimePool(t) // its own database: other tests count the package's events
	s := openStore(t, pool, t.TempDir(), 1000)
	start, err := s.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	rolledBack := errors.New("roll back")
	for w := 0; w < writers; w++ {
		wg.Add(2)
		go func(w int) { // queued appends
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				if _, err := s.Append(ctx, event(fmt.Sprintf("q%d", w), i)); err != nil {
					errs <- err
					return
				}
			}
		}(w)
		go func(w int) { // in-transaction appends; every third one rolls back
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					if _, err := s.AppendTx(ctx, tx, event(fmt.Sprintf("tx%d", w), i), event(fmt.Sprintf("tx%d", w), i)); err != nil {
						return err
					}
					if i%3 == 0 {
						return rolledBack
					}
					return nil
				})
				if err != nil && !errors.Is(err, rolledBack) {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	head, err := s.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	committedTx := 0
	for i := 0; i < perWriter; i++ {
		if i%3 != 0 {
			committedTx += 2
		}
	}
	if got, want := head.Seq-start.Seq, uint64(writers*(perWriter+committedTx)); got != want {
		t.Fatalf("events appended: got %d, want %d", got, want)
	}
	if _, err := s.Verify(ctx, audit.VerifyOptions{ChainOnly: true}); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := s.AppendTx(ctx, tx, event("closed", 0))
		return err
	})
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: got %v, want ErrClosed", err)
	}
}
