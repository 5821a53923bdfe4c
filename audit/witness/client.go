package witness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// ErrUnreachable: the witness did not answer, or answered with something
// the protocol does not define (a 5xx, a 200 without a valid
// cosignature). It says nothing about the log; the submitter retries with
// the next checkpoint.
var ErrUnreachable = cloison.NewError(cloison.CodeUnavailable, "witness: no usable answer")

// Reason names why a witness refused a checkpoint.
type Reason string

// Reasons a witness refuses.
const (
	// ReasonSmaller: the witness has cosigned a larger tree than the log
	// now has: the log was truncated or rolled back (audit.ErrSmallerTree).
	ReasonSmaller Reason = "smaller_tree"
	// ReasonFork: the checkpoint does not extend the tree the witness
	// cosigned (a failing consistency proof, or another root at its size):
	// a rewrite, or a rollback followed by new entries (audit.ErrFork).
	ReasonFork Reason = "fork"
	// ReasonUnknownLog: the witness is not configured for this origin.
	ReasonUnknownLog Reason = "unknown_log"
	// ReasonBadSignature: the witness does not trust the log's key.
	ReasonBadSignature Reason = "bad_signature"
	// ReasonBadRequest: the witness found the request malformed.
	ReasonBadRequest Reason = "bad_request"
)

// RefusedError is a witness's refusal to cosign, with its reason.
// errors.Is(err, audit.ErrSmallerTree) holds for ReasonSmaller and
// errors.Is(err, audit.ErrFork) for ReasonFork.
type RefusedError struct {
	Witness     string // the witness's key name
	Reason      Reason
	Status      int    // the HTTP status of the refusal
	WitnessSize uint64 // the size the witness last cosigned, when known
	Size        uint64 // the size submitted
}

func (e *RefusedError) Error() string {
	switch e.Reason {
	case ReasonSmaller:
		return fmt.Sprintf("witness %s refuses size %d: it cosigned size %d (the log was truncated or rolled back)", e.Witness, e.Size, e.WitnessSize)
	case ReasonFork:
		return fmt.Sprintf("witness %s refuses size %d: it does not extend the size %d it cosigned (a fork)", e.Witness, e.Size, e.WitnessSize)
	}
	return fmt.Sprintf("witness %s refuses size %d: %s (HTTP %d)", e.Witness, e.Size, e.Reason, e.Status)
}

// Unwrap maps the reason onto audit's named verification errors.
func (e *RefusedError) Unwrap() error {
	switch e.Reason {
	case ReasonSmaller:
		return audit.ErrSmallerTree
	case ReasonFork:
		return audit.ErrFork
	case ReasonUnknownLog:
		return ErrUnknownLog
	case ReasonBadSignature:
		return ErrBadSignature
	}
	return ErrBadRequest
}

// ErrorCode is the code of the error it unwraps to.
func (e *RefusedError) ErrorCode() cloison.Code { return cloison.ErrorCode(e.Unwrap()) }

// ProofFunc returns the consistency proof from oldSize to newSize of the
// log (audit/postgres Store.ConsistencyProof).
type ProofFunc func(ctx context.Context, oldSize, newSize uint64) (tlog.TreeProof, error)

// Client submits checkpoints of one log to one witness, remembering the
// size the witness last cosigned. It is safe for concurrent use; one
// submission runs at a time.
type Client struct {
	url  string // the submission prefix
	vkey string
	name string
	http *http.Client

	mu   sync.Mutex // one submission at a time; guards size
	size uint64     // the witness's size as last learned (0: unknown)
}

// NewClient returns a client of the witness at url (its submission
// prefix; POST url + "/add-checkpoint") whose cosignature key is vkey.
// size is the size the witness is believed to have cosigned last (0:
// unknown; the witness's 409 answer then tells it). hc nil: a client with
// a 10 s timeout.
//
// Errors: audit.ErrBadSignature for a vkey that does not parse;
// cloison.CodeInvalid for a URL that is not http(s).
func NewClient(url, vkey string, size uint64, hc *http.Client) (*Client, error) {
	v, err := audit.NewCosignatureVerifier(vkey)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return nil, cloison.Errorf(cloison.CodeInvalid, "witness: URL %q is not http(s)", url)
	}
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	return &Client{url: strings.TrimSuffix(url, "/"), vkey: vkey, name: v.Name(), http: hc, size: size}, nil
}

// Name returns the witness's key name.
func (c *Client) Name() string { return c.name }

// VerifierKey returns the witness's vkey.
func (c *Client) VerifierKey() string { return c.vkey }

// Size returns the size the client believes the witness cosigned last.
func (c *Client) Size() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}

// maxConflicts bounds the 409 answers one submission follows (another
// submitter may move the witness between two of ours).
const maxConflicts = 16

// Submit submits the signed checkpoint cp of tree head h (verified by the
// caller) with the consistency proof from the witness's size, and returns
// the witness's cosignature line(s), checked against its key. On a 409 it
// resubmits from the size the witness names.
//
// Errors: *RefusedError (ReasonSmaller when the witness has a larger tree
// than h, ReasonFork for a failing proof or another root at its size, and
// the others); ErrUnreachable; proof's errors.
func (c *Client) Submit(ctx context.Context, cp []byte, h audit.TreeHead, proof ProofFunc) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	refused := func(r Reason, status int) error {
		return &RefusedError{Witness: c.name, Reason: r, Status: status, WitnessSize: c.size, Size: h.Size}
	}
	for range maxConflicts {
		if c.size > h.Size {
			return nil, refused(ReasonSmaller, http.StatusConflict)
		}
		var p tlog.TreeProof
		if c.size > 0 && c.size < h.Size {
			var err error
			if p, err = proof(ctx, c.size, h.Size); err != nil {
				return nil, err
			}
		}
		var body bytes.Buffer
		fmt.Fprintf(&body, "old %d\n", c.size)
		for _, x := range p {
			body.WriteString(x.String() + "\n")
		}
		body.WriteString("\n")
		body.Write(cp)
		status, ctype, resp, err := c.post(ctx, body.Bytes())
		if err != nil {
			return nil, err
		}
		switch status {
		case http.StatusOK:
			if err := c.checkCosignature(cp, resp); err != nil {
				return nil, err
			}
			c.size = h.Size
			return resp, nil
		case http.StatusConflict:
			mt, _, _ := mime.ParseMediaType(ctype)
			n, perr := parseSize(strings.TrimSuffix(string(resp), "\n"))
			if mt != "text/x.tlog.size" || perr != nil || !strings.HasSuffix(string(resp), "\n") {
				return nil, fmt.Errorf("%w: %s answered 409 without a size", ErrUnreachable, c.name)
			}
			if n == c.size {
				// Our old size was right: the conflict is another root at
				// that very size.
				return nil, refused(ReasonFork, status)
			}
			c.size = n
			continue
		case http.StatusUnprocessableEntity:
			return nil, refused(ReasonFork, status)
		case http.StatusNotFound:
			return nil, refused(ReasonUnknownLog, status)
		case http.StatusForbidden:
			return nil, refused(ReasonBadSignature, status)
		case http.StatusBadRequest:
			return nil, refused(ReasonBadRequest, status)
		default:
			return nil, fmt.Errorf("%w: %s answered HTTP %d", ErrUnreachable, c.name, status)
		}
	}
	return nil, fmt.Errorf("%w: %s kept answering 409", ErrUnreachable, c.name)
}

func (c *Client) post(ctx context.Context, body []byte) (int, string, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+"/add-checkpoint", bytes.NewReader(body))
	if err != nil {
		return 0, "", nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, "", nil, ErrUnreachable.Wrap(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxRequestBytes))
	if err != nil {
		return 0, "", nil, ErrUnreachable.Wrap(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b, nil
}

// checkCosignature checks that lines carry a valid cosignature by this
// witness on cp.
func (c *Client) checkCosignature(cp []byte, lines []byte) error {
	full, err := audit.AddCosignatures(cp, lines)
	if err != nil {
		return fmt.Errorf("%w: %s answered 200 without signature lines", ErrUnreachable, c.name)
	}
	// The caller verified cp's own signature.
	if _, err := audit.CheckCosignatures(full, []string{c.vkey}, 1); err != nil {
		if errors.Is(err, audit.ErrTooFewCosignatures) {
			return fmt.Errorf("%w: %s answered 200 without a valid cosignature", ErrUnreachable, c.name)
		}
		return err
	}
	return nil
}

// Latest asks the witness for the latest checkpoint of the log whose note
// verifier key is logKey that it cosigned (GET /cosigned-checkpoint), and
// checks the log's signature and the witness's fresh cosignature on it. A
// verifier that must not trust the log's database requires its tree to
// extend what each witness answers: a rollback, a truncation or a rewrite
// of the database cannot change what the witness remembers.
//
// Errors: ErrNothingCosigned (the witness has cosigned nothing of this
// log); ErrUnknownLog; ErrUnreachable (no answer, another status, or an
// answer without a valid cosignature by this witness); those of
// audit.OpenTreeHead for a checkpoint the log's key did not sign.
func (c *Client) Latest(ctx context.Context, logKey string) (audit.TreeHead, []byte, error) {
	v, err := note.NewVerifier(logKey)
	if err != nil {
		return audit.TreeHead{}, nil, fmt.Errorf("%w: log key: %v", audit.ErrBadSignature, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+CosignedCheckpointPath+"?origin="+url.QueryEscape(v.Name()), nil)
	if err != nil {
		return audit.TreeHead{}, nil, ErrUnreachable.Wrap(err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return audit.TreeHead{}, nil, ErrUnreachable.Wrap(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxRequestBytes))
	if err != nil {
		return audit.TreeHead{}, nil, ErrUnreachable.Wrap(err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		if strings.Contains(string(b), ErrUnknownLog.Message) {
			return audit.TreeHead{}, nil, fmt.Errorf("%w: %s", ErrUnknownLog, c.name)
		}
		return audit.TreeHead{}, nil, fmt.Errorf("%w: %s", ErrNothingCosigned, c.name)
	default:
		return audit.TreeHead{}, nil, fmt.Errorf("%w: %s answered HTTP %d", ErrUnreachable, c.name, resp.StatusCode)
	}
	h, err := audit.OpenTreeHead(b, logKey)
	if err != nil {
		return audit.TreeHead{}, nil, fmt.Errorf("witness %s: %w", c.name, err)
	}
	if _, err := audit.CheckCosignatures(b, []string{c.vkey}, 1); err != nil {
		return audit.TreeHead{}, nil, fmt.Errorf("%w: %s: %v", ErrUnreachable, c.name, err)
	}
	c.mu.Lock()
	if h.Size > c.size {
		c.size = h.Size
	}
	c.mu.Unlock()
	return h, b, nil
}
