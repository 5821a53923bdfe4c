package attest

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/isolation"
)

// ErrFailed: the KV pool cannot hold one request of the served context (or
// a prefill node's pool cannot). The server refuses to start (or to report
// ready) with it.
var ErrFailed = cloison.NewError(cloison.CodeUnavailable, "attest: capacity attestation failed")

// Config is what capacity attestation compares.
type Config struct {
	// ModelContext is the context length the model advertises
	// (llama.context_length).
	ModelContext int
	// ServedContext is what the operator chose to serve; 0 means the model's.
	// It may only be lowered below ModelContext, never raised.
	ServedContext int
	// PoolPages and PageTokens size the KV pool.
	PoolPages  int
	PageTokens int
	// K: the pool must hold K full-context requests (default 1; the 2026
	// remediation used 2).
	K int
	// Zeroing is the pool's default zeroing mode (published, not checked).
	Zeroing isolation.Zeroing
	// Reserved pages per tenant (published).
	Reserved map[cloison.TenantID]int
	// Labels are the node's residency labels (published; Capacity fails on
	// a malformed one).
	Labels Labels
	// KVType is the element type the node's arena stores K and V in
	// (kernels.KVType's name, "f32" or "f16"; published). A decode node and
	// its prefill nodes must agree on it (Prefill).
	KVType string
}

// Labels are where a node runs and what kind of machine it is, so that a
// tenant whose data must stay in a region or on dedicated machines can be
// held to it: a region (e.g. "ca-qc") and a tier (e.g. "dedicated"). They travel
// inside the attestation, so a decode node learns its prefill nodes'
// labels from the same attested answer as their capacity, and a tenant's
// residency requirement is judged against them (Labels.Serves). Empty: the
// operator set none, which serves no tenant that requires a region or a
// tier.
type Labels struct {
	Region string `json:"region,omitempty"`
	Tier   string `json:"tier,omitempty"`
}

// ErrBadLabel: a label value outside the label alphabet.
var ErrBadLabel = cloison.NewError(cloison.CodeInvalid, "attest: bad node label")

// ValidLabel reports whether v may be a label value (cloison.ValidLabel:
// a DNS label, as a Kubernetes topology label value usually is).
func ValidLabel(v string) bool { return cloison.ValidLabel(v) }

// Check returns ErrBadLabel for a label that is set but malformed.
func (l Labels) Check() error {
	for _, kv := range [][2]string{{"region", l.Region}, {"tier", l.Tier}} {
		if kv[1] != "" && !ValidLabel(kv[1]) {
			return fmt.Errorf("%w: %s %q (want 1-63 of a-z 0-9 -, starting and ending with a letter or digit)", ErrBadLabel, kv[0], kv[1])
		}
	}
	return nil
}

// Serves reports whether a node with these labels may process the data of
// a tenant that allows regions (empty: any) and requires tier (empty:
// any). An unlabelled node serves only a tenant that requires neither.
func (l Labels) Serves(regions []string, tier string) bool {
	if len(regions) > 0 && (l.Region == "" || !slices.Contains(regions, l.Region)) {
		return false
	}
	return tier == "" || l.Tier == tier
}

// Attestation is the published statement of what a node's engine serves and
// what its pool holds: the API, the metrics and the ledger publish it
// verbatim.
type Attestation struct {
	ModelContext  int                 `json:"model_context"`
	ServedContext int                 `json:"served_context"`
	PoolTokens    int                 `json:"pool_tokens"`
	PoolPages     int                 `json:"pool_pages"`
	PageTokens    int                 `json:"page_tokens"`
	K             int                 `json:"k"`
	Zeroing       string              `json:"zeroing"`
	Reserved      []TenantReservation `json:"reserved,omitempty"`
	OK            bool                `json:"ok"`
	Reason        string              `json:"reason,omitempty"`
	// Labels are the node's residency labels (region, tier).
	Labels Labels `json:"labels"`
	// KVType is the element type of the node's KV arena ("f32", "f16").
	KVType string `json:"kv_type"`
	// Prefill lists a decode node's prefill nodes as they attested
	// themselves (Prefill); empty on a node that prefills itself.
	Prefill []PrefillPeer `json:"prefill,omitempty"`
	// Model and ModelDigest name the model the pool serves (its id and
	// the hex SHA-256 of its GGUF file): a node serving several models
	// attests each with its own pool; empty where the caller set none.
	Model       string `json:"model,omitempty"`
	ModelDigest string `json:"model_digest,omitempty"`
	// Adapters are the LoRA adapters loaded for the model, filled in when
	// the attestation is shown (never recorded: they change at run time).
	// A tenant is shown its own adapters only, without a tenant id; an
	// admin every tenant's, each with its tenant.
	Adapters []AttestedAdapter `json:"adapters,omitempty"`
}

// AttestedAdapter is one LoRA adapter loaded for an attested model: the
// tenant it serves (an admin's view only), its name, the hex SHA-256 of its
// file and its rank.
type AttestedAdapter struct {
	Tenant cloison.TenantID `json:"tenant,omitempty"`
	Name   string           `json:"name"`
	Digest string           `json:"digest"`
	Rank   int              `json:"rank"`
}

// PrefillPeer is one prefill node's capacity attestation, as the decode node
// that uses it fetched it at startup.
type PrefillPeer struct {
	Addr        string      `json:"addr"`
	ModelDigest string      `json:"model_digest"` // hex SHA-256 of the GGUF file it serves
	Attestation Attestation `json:"attestation"`
	// Certified are the labels the node's certificate names (as the CA
	// signed them), nil when the answer came with no certificate: a peer
	// attests exactly these or fails (Prefill).
	Certified *Labels `json:"certified,omitempty"`
	OK        bool    `json:"ok"`
	Reason    string  `json:"reason,omitempty"`
}

// PrefillNode names the prefill node that served a request and its labels
// as it attested them (the ledger's record of where a prompt went).
type PrefillNode struct {
	Addr   string `json:"addr"`
	Labels Labels `json:"labels"`
}

// Prefill checks a decode node's prefill nodes (defence layer 2, capacity
// attestation: the check the 2026 operators lacked: their prefill pool held 65% of the
// advertised context). Every peer must serve the decode node's model
// (modelDigest, hex; a node serving several models is checked once per
// model, with that model's attestation and digest) and hold a whole request of the decode node's served
// context in its pool, having passed its own attestation; it must attest
// exactly the labels its certificate names (Certified), none without one. It marks each peer
// OK or not with a Reason, records them in decode.Prefill, and returns the
// updated attestation with ErrFailed (OK false) if any peer fails: the
// decode node then refuses to start. capacity is the smallest peer pool in
// tokens (admission's bound on a prompt).
func Prefill(decode Attestation, modelDigest string, peers []PrefillPeer) (a Attestation, capacity int, err error) {
	a = decode
	a.Prefill = nil
	var bad []string
	for _, p := range peers {
		pa := p.Attestation
		switch {
		case p.ModelDigest == "" && modelDigest != "":
			p.OK, p.Reason = false, fmt.Sprintf("does not serve model %.16s…", modelDigest)
		case p.ModelDigest != modelDigest:
			p.OK, p.Reason = false, fmt.Sprintf("serves model %.16s…, this node %.16s…", p.ModelDigest, modelDigest)
		case !pa.OK:
			p.OK, p.Reason = false, "its own attestation failed: "+pa.Reason
		case pa.PoolTokens < a.ServedContext:
			p.OK, p.Reason = false, fmt.Sprintf("prefill pool holds %d tokens, the served context is %d", pa.PoolTokens, a.ServedContext)
		case pa.Labels.Check() != nil:
			p.OK, p.Reason = false, pa.Labels.Check().Error()
		case p.Certified == nil && pa.Labels != (Labels{}):
			p.OK, p.Reason = false, fmt.Sprintf("attests region %q tier %q, but no certificate names them", pa.Labels.Region, pa.Labels.Tier)
		case p.Certified != nil && *p.Certified != pa.Labels:
			p.OK, p.Reason = false, fmt.Sprintf("attests region %q tier %q, its certificate names region %q tier %q",
				pa.Labels.Region, pa.Labels.Tier, p.Certified.Region, p.Certified.Tier)
		case pa.KVType != a.KVType:
			p.OK, p.Reason = false, fmt.Sprintf("stores KV as %q, this node as %q (the transfer refuses pages of another type)", pa.KVType, a.KVType)
		case pa.ServedContext < a.ServedContext:
			p.OK, p.Reason = false, fmt.Sprintf("serves a context of %d tokens, this node %d", pa.ServedContext, a.ServedContext)
		default:
			p.OK, p.Reason = true, ""
		}
		if !p.OK {
			bad = append(bad, p.Addr+": "+p.Reason)
		}
		if capacity == 0 || pa.PoolTokens < capacity {
			capacity = pa.PoolTokens
		}
		a.Prefill = append(a.Prefill, p)
	}
	if len(peers) == 0 {
		bad = append(bad, "no prefill node")
	}
	if len(bad) > 0 {
		a.OK = false
		a.Reason = "prefill nodes: " + strings.Join(bad, "; ")
		return a, capacity, fmt.Errorf("%w: %s", ErrFailed, a.Reason)
	}
	return a, capacity, nil
}

// TenantReservation is one tenant's reserved pages.
type TenantReservation struct {
	Tenant cloison.TenantID `json:"tenant"`
	Pages  int              `json:"pages"`
}

// Capacity computes a node's capacity attestation. It returns the attestation
// in every case (OK false with a Reason when it fails) and ErrFailed when
// the pool cannot hold K requests of the served context: pool_tokens <
// K × served_context. The served context defaults to the model's; an operator
// who wants to run a smaller pool must lower it explicitly, and the API then
// advertises the lowered value — never more than the pool holds.
func Capacity(c Config) (Attestation, error) {
	if c.K == 0 {
		c.K = 1
	}
	a := Attestation{
		ModelContext:  c.ModelContext,
		ServedContext: c.ServedContext,
		PoolPages:     c.PoolPages,
		PoolTokens:    c.PoolPages * c.PageTokens,
		PageTokens:    c.PageTokens,
		K:             c.K,
		Zeroing:       c.Zeroing.String(),
		Labels:        c.Labels,
		KVType:        c.KVType,
	}
	if a.ServedContext == 0 {
		a.ServedContext = c.ModelContext
	}
	for t, n := range c.Reserved {
		a.Reserved = append(a.Reserved, TenantReservation{Tenant: t, Pages: n})
	}
	sort.Slice(a.Reserved, func(i, j int) bool { return a.Reserved[i].Tenant < a.Reserved[j].Tenant })
	fail := func(format string, args ...any) (Attestation, error) {
		a.Reason = fmt.Sprintf(format, args...)
		return a, fmt.Errorf("%w: %s", ErrFailed, a.Reason)
	}
	if err := c.Labels.Check(); err != nil {
		return fail("%v", err)
	}
	switch {
	case c.ModelContext < 1:
		return fail("model context %d", c.ModelContext)
	case c.K < 1:
		return fail("k = %d", c.K)
	case c.PoolPages < 1 || c.PageTokens < 1:
		return fail("pool of %d pages of %d tokens", c.PoolPages, c.PageTokens)
	case a.ServedContext < 1:
		return fail("served context %d", a.ServedContext)
	case a.ServedContext > c.ModelContext:
		return fail("served context %d exceeds the model's context %d", a.ServedContext, c.ModelContext)
	case a.PoolTokens < c.K*a.ServedContext:
		hint := ""
		if c.ServedContext == 0 {
			hint = fmt.Sprintf("; lower the served context to at most %d explicitly, or enlarge the pool", a.PoolTokens/c.K)
		}
		return fail("pool holds %d tokens, %d × served context %d = %d needed%s", a.PoolTokens, c.K, a.ServedContext, c.K*a.ServedContext, hint)
	}
	a.OK = true
	return a, nil
}
