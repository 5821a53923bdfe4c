package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/postgres"
)

// clock is the verifier's time, against which receipts come due (their
// deadline is audit.MaxMergeDelay after the node signed them); a test
// seam, time.Now otherwise.
var clock = time.Now

// receiptsReport prints what CheckReceipts found and returns its error:
// every receipt past its deadline whose entry the verified log lacks,
// named by request and leaf hash (audit.ErrReceiptBroken, exit status 3).
func receiptsReport(out io.Writer, rep audit.ReceiptReport) error {
	for _, r := range rep.Included {
		fmt.Fprintf(out, "receipt of request %s: included at %d\n", r.Request, r.Pos)
	}
	for _, r := range rep.Pending {
		fmt.Fprintf(out, "receipt of request %s: not yet in the log, due %s\n", r.Request, r.Deadline.Format(time.RFC3339))
	}
	fmt.Fprintln(out, rep)
	return rep.Err()
}

// findLeaves returns a lookup of the receipts' leaves among the leaves
// each(fn) calls fn with, at positions 1, 2, ...: it keeps only the
// receipts' leaves, so the log streams through in constant memory.
func findLeaves(rs []audit.Receipt, each func(fn func(pos uint64, leaf tlog.Hash)) error) (func(tlog.Hash) (uint64, bool), error) {
	want := map[tlog.Hash]uint64{}
	for _, r := range rs {
		want[r.Leaf] = 0
	}
	err := each(func(pos uint64, leaf tlog.Hash) {
		if p, ok := want[leaf]; ok && p == 0 {
			want[leaf] = pos
		}
	})
	return func(h tlog.Hash) (uint64, bool) {
		p := want[h]
		return p, p > 0
	}, err
}

// verifyReceiptsInDatabase checks the receipts in file against the
// ledger in the database, which verifyDatabase has verified: an entry
// counts as in the log when it is under the latest tree note signed by a
// trusted key (Verify matched that note to the recomputed tree), or with
// witnesses > 0 under the latest one that many witnesses cosigned; not
// merely in a row.
//
// Errors: audit.ErrReceiptBroken (a *audit.ReceiptsError naming each
// missing entry); audit.ErrNoCheckpoint; the file's, the receipts'
// (audit.ErrMalformed, audit.ErrBadSignature) and the database's.
func verifyReceiptsInDatabase(ctx context.Context, s *postgres.Store, origin string, pubs map[string]ed25519.PublicKey, witnesses int, file string, out io.Writer) error {
	var vkeys []string
	for _, pub := range pubs {
		vk, err := audit.TreeVerifierKey(audit.Name(origin), pub)
		if err != nil {
			return err
		}
		vkeys = append(vkeys, vk)
	}
	if len(vkeys) == 0 {
		return cloison.NewError(cloison.CodeInvalid, "--receipts needs the log's --public-key")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("receipts: %w", err)
	}
	rs, err := audit.ReadReceipts(b, vkeys...)
	if err != nil {
		return err
	}
	latest, err := s.TreeCheckpoint(ctx)
	if witnesses > 0 {
		// The witnessed log: the latest checkpoint that many witnesses
		// cosigned (checked by witnessVerify.check before this).
		latest, err = s.CosignedCheckpoint(ctx, witnesses)
	}
	if err != nil {
		return err
	}
	var head audit.TreeHead
	for _, vk := range vkeys {
		if head, err = audit.OpenTreeHead(latest, vk); err == nil {
			break
		}
	}
	if err != nil {
		return err
	}
	found, err := findLeaves(rs, func(fn func(uint64, tlog.Hash)) error {
		if head.Size == 0 {
			return nil
		}
		return s.Scan(ctx, 1, head.Size, func(r audit.Record) error {
			fn(r.Seq, audit.LeafHash(r))
			return nil
		})
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "receipts checked against the tree note of size %d\n", head.Size)
	return receiptsReport(out, audit.CheckReceipts(rs, audit.Name(origin), clock(), found))
}

// verifyServerReceipts checks the receipts in file against the log that
// verifyLog verified on the server: tenant o.Tenant's own log when set,
// otherwise the global log (head, an admin's listing). The whole log is
// listed and recomputed against its signed checkpoint, so a position
// counts only under a signature: a cost linear in the log, paid once for
// every receipt in the file. A receipt's leaf is the entry's leaf in the
// tenant log too (audit.TenantLeaf: a request's entries name their tenant
// alone). With o.Witnesses (global log), an entry counts only up to
// cosigned, the size of the cosigned checkpoint the head extends.
//
// Errors: as verifyReceiptsInDatabase; audit.ErrNotIncluded for a
// listing that is not the signed log; listTenantLog's and the server's.
func verifyServerReceipts(ctx context.Context, o logVerifyOptions, head audit.TreeHead, cosigned uint64, file string, out io.Writer) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("receipts: %w", err)
	}
	rs, err := audit.ReadReceipts(b, o.VerifierKey)
	if err != nil {
		return err
	}
	for _, r := range rs {
		if o.Tenant != "" && r.Tenant != o.Tenant {
			return cloison.Errorf(cloison.CodeInvalid, "receipt of request %s is tenant %s's, not in tenant %s's log", r.Request, r.Tenant, o.Tenant)
		}
	}
	var l tenantListing
	if o.Tenant != "" {
		l, err = listTenantLog(ctx, tenantListOptions{Server: o.Server, Token: o.Token, VerifierKey: o.VerifierKey, Tenant: o.Tenant, Client: o.Client})
	} else {
		l, err = listGlobalLog(ctx, o, head)
	}
	if err != nil {
		return err
	}
	found, _ := findLeaves(rs, func(fn func(uint64, tlog.Hash)) error {
		for _, r := range l.Rows {
			fn(r.Pos, tlog.RecordHash(r.Leaf))
		}
		return nil
	})
	v, err := note.NewVerifier(o.VerifierKey)
	if err != nil {
		return fmt.Errorf("%w: verifier key: %v", audit.ErrMalformed, err)
	}
	if o.Tenant == "" && o.Witnesses > 0 {
		// The witnessed log: positions up to the cosigned checkpoint the
		// head was proved to extend (verifyLog).
		inTree := found
		found = func(h tlog.Hash) (uint64, bool) {
			p, ok := inTree(h)
			return p, ok && p <= cosigned
		}
		l.Head.Size = cosigned
	}
	fmt.Fprintf(out, "receipts checked against log %s of size %d\n", l.Head.Origin, l.Head.Size)
	return receiptsReport(out, audit.CheckReceipts(rs, audit.Name(v.Name()), clock(), found))
}

// listGlobalLog lists the global log's entries 1..head.Size (GET
// /compliance/v1/ledger, admin) and checks that they are the tree head
// signs, by recomputing its root.
//
// Errors: audit.ErrNotIncluded (rows missing or not the signed tree);
// audit.ErrMalformed; the server's.
func listGlobalLog(ctx context.Context, o logVerifyOptions, head audit.TreeHead) (tenantListing, error) {
	l := tenantListing{Head: head}
	if head.Size == 0 {
		return l, nil
	}
	c := &logClient{base: strings.TrimRight(o.Server, "/"), token: o.Token, http: o.Client}
	if c.http == nil {
		c.http = &http.Client{Timeout: 5 * time.Minute}
	}
	body, err := c.get(ctx, "/compliance/v1/ledger", url.Values{"from": {"1"}, "to": {strconv.FormatUint(head.Size, 10)}})
	if err != nil {
		return l, err
	}
	if l.Rows, err = decodeListing(body, 1); err != nil {
		return l, err
	}
	m := &audit.MemTree{}
	for _, r := range l.Rows {
		if _, err := m.Append(r.Leaf); err != nil {
			return l, err
		}
	}
	h, err := m.Head(head.Origin, m.Size())
	if err != nil {
		return l, err
	}
	if m.Size() != head.Size || h.Root != head.Root {
		return l, fmt.Errorf("%w: the listed entries are not the log the checkpoint signs", audit.ErrNotIncluded)
	}
	return l, nil
}
