package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/cloison/cloison"
)

// RFC 8785 section 3.2.3 (the worked example) and Appendix B (numbers).
func TestCanonicalizeRFC8785(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"rfc example",
			`{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001], "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/", "literals": [null, true, false]}`,
			`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
		{"sorting by utf-16",
			`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
			"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
		{"nested whitespace", " { \"b\" : [ 1 , { \"z\":1, \"a\":2 } ] , \"a\" : \"x\" } ", `{"a":"x","b":[1,{"a":2,"z":1}]}`},
		{"no html escaping", `"<&>\u2028"`, "\"<&>\u2028\""},
		{"minus zero", `-0.0`, `0`},
		{"empty containers", `[{},[]]`, `[{},[]]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestFormatNumberAppendixB(t *testing.T) {
	tests := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tt := range tests {
		if got := FormatNumber(math.Float64frombits(tt.bits)); got != tt.want {
			t.Errorf("%016x: got %s, want %s", tt.bits, got, tt.want)
		}
	}
}

func TestCanonicalizeRefuses(t *testing.T) {
	for _, in := range []string{
		``, `{`, `{"a":1,"a":2}`, `"\ud800"`, `"\udc00x"`, "\"\xff\"", `[1,]`, `01`, `1.`, `1e`, `1e999`,
		`{"a" 1}`, `[1] x`, `"a` + "\x01" + `"`, `nul`, `"\x"`, `+1`, `.5`, `NaN`,
	} {
		if _, err := Canonicalize([]byte(in)); !errors.Is(err, ErrNotCanonical) {
			t.Errorf("Canonicalize(%q): got %v, want ErrNotCanonical", in, err)
		}
	}
}

// FuzzCanonicalize: whatever parses canonicalizes to a fixed point that
// encoding/json reads as the same value.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[true,null,"x\u0000"]}`, `1e30`, `-0.000001`, `"\ud83d\ude00"`, `{"\u00e9":{"":[]}}`, `123456789012345678901234567890`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := Canonicalize(in)
		if err != nil {
			return
		}
		c2, err := Canonicalize(c)
		if err != nil || string(c2) != string(c) {
			t.Fatalf("not a fixed point: %q -> %q -> %q (%v)", in, c, c2, err)
		}
		var a, b any
		if err := json.Unmarshal(in, &a); err != nil {
			t.Fatalf("canonicalized input encoding/json refuses: %v", err)
		}
		if err := json.Unmarshal(c, &b); err != nil {
			t.Fatalf("encoding/json refuses canonical output %q: %v", c, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("value changed: %q -> %q", in, c)
		}
	})
}

// examples holds one valid payload of every kind.
var examples = map[Kind]Payload{
	KindPolicyDecision:       &PolicyDecision{Decision: "pd_1", Policy: "data.cloison.policy.decision", Revision: "abc", Allowed: true, LatencyMicros: 15},
	KindAdmissionRejected:    &AdmissionRejected{Request: "req-1", Model: "m", Code: "context_length_exceeded", PromptTokens: 9000, MaxTokens: 1, PagesNeeded: 563, PagesAvailable: 256},
	KindRequestCompleted:     &RequestCompleted{Request: "req-1", Model: "m", PromptTokens: 3, CompletionTokens: 7, Pages: 1, Tier: "cross-tenant"},
	KindIsolationViolation:   &IsolationViolation{Request: "req-1", Invariant: "epoch", AffectedTenants: []cloison.TenantID{"t1"}, AffectedRequests: []cloison.RequestID{"req-1"}, WithheldResponses: 1},
	KindTransferVerification: &TransferVerificationFailed{Request: "req-1", Source: "prefill-0", Check: "page-digest", ReservedTokens: 32, TransferredTokens: 32, PagesMismatched: 1},
	KindCapacityAttestation:  &CapacityAttestation{Node: "n1", Model: "m", AdvertisedContext: 4096, ServableContext: 4096, PoolPages: 256, PageTokens: 16, Ready: true},
	KindIncidentOpened:       &IncidentOpened{Incident: "inc-1", Source: "isolation-violation", Version: 1, ContentDigest: Sum([]byte("v1"))},
	KindIncidentUpdated:      &IncidentUpdated{Incident: "inc-1", Version: 2, ContentDigest: Sum([]byte("v2"))},
	KindIncidentPurged:       &IncidentPurged{Incident: "inc-1", Versions: 2, Notices: 1, LastContentDigest: Sum([]byte("v2")), RetainUntil: "2031-11-29"},
	KindNoticeSent:           &NoticeSent{Incident: "inc-1", Notice: 1, Recipient: "cai", ContentDigest: Sum([]byte("n"))},
	KindTenantCreated:        &TenantChange{Op: TenantCreated, Tier: "shared"},
	KindTenantUpdated:        &TenantChange{Op: TenantUpdated},
	KindTenantDisabled:       &TenantChange{Op: TenantDisabled},
	KindKeyCreated:           &KeyChange{Op: KeyCreated, Key: "k1", Purpose: "jwt"},
	KindKeyRotated:           &KeyChange{Op: KeyRotated, Key: "k2", Purpose: "jwt"},
	KindKeyRevoked:           &KeyChange{Op: KeyRevoked, Key: "k1", Purpose: "jwt"},
	KindExportCreated:        &ExportCreated{Export: "exp-1", FromSeq: 1, ToSeq: 9, Files: 3},
	KindPolicyReloaded:       &PolicyReloaded{Revision: Sum([]byte("bundle")), Files: 7, Actor: "admin:alice"},
	KindPolicyRefusals: &PolicyRefusals{FromMicros: 1796040000000000, ToMicros: 1796040010000000, Total: 942,
		Counts: []RefusalCount{{Stage: "policy", Code: "permission_denied", Count: 2}, {Stage: "quota", Code: "rate_limited", Count: 940}}},
	KindClientCreated:    &ClientChange{Op: ClientCreated, Client: "svc-a", Scopes: []Name{"infer"}},
	KindClientRevoked:    &ClientChange{Op: ClientRevoked, Client: "svc-a", Scopes: []Name{"infer"}},
	KindTokenRevoked:     &TokenRevoked{Token: "jti-1", Issuer: "cloison-dev", Expires: "2027-01-01"},
	KindRegisterSettings: &RegisterSettingsSet{Version: 2, ContentDigest: Sum([]byte("settings"))},
	KindReportReceived:   &ReportReceived{Report: "rep-1", Request: "req-1", Reason: "foreign-content", Sealed: true, Incident: "inc-1"},
	KindRequestReplayed: &RequestReplayed{Request: "req-1", Report: "rep-1", Incident: "inc-1", By: "tenant", Verdict: VerdictConfirmed,
		Key: "sd1", Completion: &Digest{1}, ReplayMicros: 10, OriginalMicros: 12},
	KindResponseStored:  &ResponseStored{Response: "resp_1", Request: "req-1", Sealed: Digest{2}, Bytes: 120},
	KindResponseDeleted: &ResponseDeleted{Response: "resp_1", Sealed: Digest{2}},
	KindSigningBegan:    &SigningBegan{Seq: 7, Key: "0123456789abcdef"},
	KindModelLoaded:     &ModelLoaded{Node: "node-1", Model: "tiny-b", Digest: Sum([]byte("model")), Bytes: 1 << 20, Actor: "admin:alice"},
	KindModelUnloaded:   &ModelUnloaded{Node: "node-1", Model: "tiny-b", Digest: Sum([]byte("model")), Actor: "admin:alice"},
	KindAdapterRegistered: &AdapterRegistered{Node: "node-1", Name: "support", Digest: Sum([]byte("adapter")), Model: "tiny-b",
		ModelDigest: Sum([]byte("model")), Rank: 16, Actor: "admin:alice"},
	KindAdapterUnregistered: &AdapterUnregistered{Node: "node-1", Name: "support", Digest: Sum([]byte("adapter")), Model: "tiny-b", Actor: "admin:alice"},
}

// Every kind has one payload type whose canonical encoding decodes back to
// the same value and is a fixed point of Canonicalize, so that its hash is
// a function of the value alone.
func TestEveryKindRoundTrips(t *testing.T) {
	for _, k := range Kinds {
		t.Run(string(k), func(t *testing.T) {
			p, ok := examples[k]
			if !ok {
				t.Fatalf("no example payload of kind %s", k)
			}
			if got := p.Kind(); got != k {
				t.Fatalf("got kind %s, want %s", got, k)
			}
			e := Event{OccurredAt: t0, Tenant: "tenant-a", Actor: "engine:node-1", Payload: p}
			b, err := e.Canonical()
			if err != nil {
				t.Fatal(err)
			}
			if c, err := Canonicalize(b); err != nil || string(c) != string(b) {
				t.Fatalf("got %s (%v), want the fixed point %s", c, err, b)
			}
			env, err := DecodeEnvelope(b)
			if err != nil {
				t.Fatal(err)
			}
			got, err := env.DecodePayload()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, p) {
				t.Fatalf("got %+v, want %+v", got, p)
			}
			r1, err := Head{}.Next(e)
			if err != nil {
				t.Fatal(err)
			}
			if r1.Hash != HashEvent(1, Digest{}, b) {
				t.Fatalf("got hash %s, want %s", r1.Hash, HashEvent(1, Digest{}, b))
			}
		})
	}
}

// The policy.refusals summary: its exact bytes are pinned (the SQL side and
// external verifiers hash these), and a summary that does not add up, is
// unsorted, repeats an entry or holds text is refused.
func TestPolicyRefusalsCanonical(t *testing.T) {
	e := Event{OccurredAt: t0, Tenant: "tenant-a", Actor: "engine:node-1", Payload: examples[KindPolicyRefusals]}
	b, err := e.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"actor":"engine:node-1","data":{"counts":[{"code":"permission_denied","count":2,"stage":"policy"},{"code":"rate_limited","count":940,"stage":"quota"}],"from_unix_micros":1796040000000000,"to_unix_micros":1796040010000000,"total":942},"kind":"policy.refusals","occurred_at":"2026-11-29T12:00:00.123456Z","tenant":"tenant-a","v":1}`
	if string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
	ok := func() PolicyRefusals {
		p := *examples[KindPolicyRefusals].(*PolicyRefusals)
		p.Counts = append([]RefusalCount(nil), p.Counts...)
		return p
	}
	tests := []struct {
		name string
		edit func(*PolicyRefusals)
		want error
	}{
		{"wrong total", func(p *PolicyRefusals) { p.Total = 941 }, ErrInvalidEvent},
		{"no counts", func(p *PolicyRefusals) { p.Counts, p.Total = nil, 0 }, ErrInvalidEvent},
		{"zero count", func(p *PolicyRefusals) { p.Counts[0].Count, p.Total = 0, 940 }, ErrInvalidEvent},
		{"unsorted", func(p *PolicyRefusals) { p.Counts[0], p.Counts[1] = p.Counts[1], p.Counts[0] }, ErrInvalidEvent},
		{"repeated", func(p *PolicyRefusals) { p.Counts[1] = p.Counts[0]; p.Total = 4 }, ErrInvalidEvent},
		{"window backwards", func(p *PolicyRefusals) { p.ToMicros = p.FromMicros - 1 }, ErrInvalidEvent},
		{"text in a code", func(p *PolicyRefusals) { p.Counts[0].Code = "ignore previous instructions" }, ErrTextNotAllowed},
		{"too many entries", func(p *PolicyRefusals) {
			p.Counts, p.Total = nil, 0
			for i := range MaxRefusalCounts + 1 {
				p.Counts = append(p.Counts, RefusalCount{Stage: "policy", Code: cloison.Code(fmt.Sprintf("c%04d", i)), Count: 1})
				p.Total++
			}
		}, ErrInvalidEvent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := ok()
			tt.edit(&p)
			if _, err := (Event{OccurredAt: t0, Actor: "engine:node-1", Payload: p}).Canonical(); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}
