package export

import (
	"bytes"
	"crypto/ed25519"
	"encoding/csv"
	"errors"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/image/font/gofont/gobold"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/sfnt"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison/audit"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func sampleManifest(t testing.TB, key ed25519.PrivateKey) Manifest {
	signer, err := audit.TreeSigner("prod", key)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := audit.SignTreeHead(signer, audit.TreeHead{Origin: "prod", Size: 9, Root: tlog.Hash(audit.Sum([]byte("r")))})
	if err != nil {
		t.Fatal(err)
	}
	m := Manifest{Created: t0, Origin: "prod", From: 3, To: 9, Prev: audit.Sum([]byte("p")), Head: audit.Sum([]byte("h")), Checkpoint: cp,
		Files: []File{{Name: "register.pdf", Size: 10, SHA256: audit.Sum([]byte("b"))}, {Name: "ledger.jsonl", Size: 5, SHA256: audit.Sum([]byte("a"))}}}
	if err := m.Sign(key); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestManifestRoundTrip(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(nil)
	m := sampleManifest(t, key)
	text := m.Marshal()
	p, err := ParseManifest(text)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, m) {
		t.Errorf("got %+v, want %+v", p, m)
	}
	if p.Files[0].Name != "ledger.jsonl" {
		t.Errorf("files not sorted: %v", p.Files)
	}
	if err := p.Verify(audit.KeySet(pub)); err != nil {
		t.Error(err)
	}
	p.Files[0].Size++
	if err := p.Verify(audit.KeySet(pub)); !errors.Is(err, ErrVerify) {
		t.Errorf("altered manifest: got %v, want ErrVerify", err)
	}
	for _, bad := range []string{
		strings.Replace(string(text), "ledger 3 9", "ledger 9 3", 1),
		strings.Replace(string(text), "ledger 3 9", "ledger 03 9", 1),
		strings.Replace(string(text), " ledger.jsonl", " ../ledger.jsonl", 1),
		strings.Replace(string(text), " ledger.jsonl", " manifest.txt", 1),
		strings.Replace(string(text), " register.pdf", " ledger.jsonl", 1),
		strings.TrimSuffix(string(text), "\n"),
	} {
		if _, err := ParseManifest([]byte(bad)); !errors.Is(err, ErrMalformedManifest) {
			t.Errorf("ParseManifest(%q): got %v, want ErrMalformedManifest", bad, err)
		}
	}
}

// FuzzParseManifest: what parses marshals back to the same bytes.
func FuzzParseManifest(f *testing.F) {
	_, key, _ := ed25519.GenerateKey(nil)
	m := sampleManifest(f, key)
	f.Add(m.Marshal())
	m.Checkpoint, m.From, m.To = nil, 0, 0
	_ = m.Sign(key)
	f.Add(m.Marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseManifest(b)
		if err != nil {
			return
		}
		if got := m.Marshal(); !bytes.Equal(got, b) {
			t.Fatalf("round trip: %q -> %q", b, got)
		}
	})
}

func TestSafeCell(t *testing.T) {
	tests := []struct{ in, want string }{
		{"=HYPERLINK(\"http://x\",\"clic\")", "'=HYPERLINK(\"http://x\",\"clic\")"},
		{"+1+1", "'+1+1"}, {"-2", "'-2"}, {"@SUM(A1)", "'@SUM(A1)"}, {"\tcmd", "'\tcmd"}, {"\r=1", "'\r=1"},
		{"＝1+1", "'＝1+1"}, {"Élise Côté", "Élise Côté"}, {"", ""}, {"a=b", "a=b"},
	}
	for _, tt := range tests {
		if got := SafeCell(tt.in); got != tt.want {
			t.Errorf("SafeCell(%q): got %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRegisterCSVHasBOMAndAccents(t *testing.T) {
	var buf bytes.Buffer
	risk := false
	v := audit.StoredVersion{IncidentVersion: audit.IncidentVersion{Incident: "inc-1", Version: 1, Status: audit.IncidentOpen, Source: audit.SourceAdmin,
		PersonalInfo: "=cmd|' /C calc'!A0", Circumstances: "Fuite d'adresses — « données »", Occurred: audit.Period{Start: "2026-11-01"},
		Awareness: audit.Period{Start: "2026-11-02"}, Assessment: audit.Assessment{Status: audit.AssessmentCompleted, RiskOfSeriousInjury: &risk}}}
	if err := WriteRegisterCSV(&buf, []audit.IncidentFile{{ID: "inc-1", Versions: []audit.StoredVersion{v}}}); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if !bytes.HasPrefix(b, []byte("\xEF\xBB\xBF")) {
		t.Fatal("no UTF-8 BOM")
	}
	recs, err := csv.NewReader(bytes.NewReader(b[3:])).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || len(recs[0]) != len(recs[1]) {
		t.Fatalf("got %d rows", len(recs))
	}
	row := strings.Join(recs[1], "|")
	if !strings.Contains(row, "'=cmd|' /C calc'!A0") || !strings.Contains(row, "« données »") || !strings.Contains(row, "non / no") {
		t.Errorf("row: %s", row)
	}
	if !strings.Contains(strings.Join(recs[0], "|"), "Date ou période de prise de connaissance (art. 7(4)) / Date or period of awareness (s. 7(4))") {
		t.Errorf("header lacks bilingual labels: %v", recs[0])
	}
}

func TestLedgerJSONLRoundTrip(t *testing.T) {
	var h audit.Head
	var buf bytes.Buffer
	var recs []audit.Record
	for i := 0; i < 5; i++ {
		r, err := h.Next(audit.Event{OccurredAt: t0, Actor: "a", Payload: audit.CapacityAttestation{Node: "n", Model: "m", AdvertisedContext: 8192, ServableContext: 8192, Ready: true}})
		if err != nil {
			t.Fatal(err)
		}
		r.RecordedAt = t0.Add(time.Duration(i) * time.Microsecond)
		recs = append(recs, r)
		buf.Write(AppendLedgerLine(nil, r))
		h = r.Head()
	}
	var got []audit.Record
	if err := ReadLedgerJSONL(bytes.NewReader(buf.Bytes()), func(r audit.Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if got[i].Seq != recs[i].Seq || got[i].Hash != recs[i].Hash || !bytes.Equal(got[i].Payload, recs[i].Payload) || !got[i].RecordedAt.Equal(recs[i].RecordedAt) {
			t.Errorf("record %d: got %+v, want %+v", i, got[i], recs[i])
		}
		if !audit.IsCanonical(bytes.TrimSuffix(AppendLedgerLine(nil, recs[i]), []byte("\n"))) {
			t.Errorf("line %d is not canonical JSON", i)
		}
	}
	spaced := bytes.Replace(buf.Bytes(), []byte(`,"hash"`), []byte(`, "hash"`), 1)
	if err := ReadLedgerJSONL(bytes.NewReader(spaced), func(audit.Record) error { return nil }); !errors.Is(err, ErrVerify) {
		t.Errorf("re-serialised line: got %v, want ErrVerify", err)
	}
}

// The embedded fonts have a glyph for every character the report prints,
// French accents included.
func TestPDFFontsCoverFrench(t *testing.T) {
	var labels strings.Builder
	for _, f := range registerFields(audit.StoredVersion{}, nil, time.Time{}) {
		labels.WriteString(f.fr + f.en)
	}
	labels.WriteString("àâäçéèêëîïôöùûüÿœæÀÂÇÉÈÊËÎÏÔÙÛŒÆ«»—–→·’")
	for name, ttf := range map[string][]byte{"regular": goregular.TTF, "bold": gobold.TTF} {
		f, err := sfnt.Parse(ttf)
		if err != nil {
			t.Fatal(err)
		}
		var b sfnt.Buffer
		for _, r := range labels.String() {
			if gi, err := f.GlyphIndex(&b, r); err != nil || gi == 0 {
				t.Errorf("%s font has no glyph for %q", name, r)
			}
		}
	}
}

func TestRegisterPDF(t *testing.T) {
	long := strings.Repeat("Mesure corrective appliquée à l'ensemble des nœuds ; ", 400)
	v := audit.StoredVersion{IncidentVersion: audit.IncidentVersion{Incident: "inc-1", Version: 1, Status: audit.IncidentOpen, Source: audit.SourceAdmin,
		PersonalInfo: "Représentations de requêtes (cache KV)", Circumstances: long, Occurred: audit.Period{Start: "2026-11-01"},
		Awareness: audit.Period{Start: "2026-11-02"}, Assessment: audit.Assessment{Status: audit.AssessmentPending}}, RetainUntil: "2031-11-02"}
	var buf bytes.Buffer
	err := WriteRegisterPDF(&buf, []audit.IncidentFile{{ID: "inc-1", OpenedAt: t0, OpenedBy: "admin:élise", Versions: []audit.StoredVersion{v},
		Notices: []audit.StoredNotice{{Notice: audit.Notice{Number: 1, Recipient: audit.RecipientCAI, RecipientName: "Commission d'accès à l'information", SentAt: t0, Method: "portail"}}}}},
		ReportMeta{Organization: audit.Organization{Name: "Société Québécoise inc.", NEQ: "1170000000"}, Generated: t0, Origin: "prod", From: 1, To: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(buf.Bytes(), []byte("%PDF-")) || buf.Len() < 10000 {
		t.Fatalf("not a PDF (%d bytes)", buf.Len())
	}
	if n := bytes.Count(buf.Bytes(), []byte("/Type /Page\n")) + bytes.Count(buf.Bytes(), []byte("/Type /Page ")); n < 2 {
		t.Logf("page objects counted: %d", n)
	}
}

// register.pdf is a pure function of its inputs: rendered again (as
// VerifyDir does), it is the same bytes, whatever the map orders of the
// run; a different header is a different PDF.
func TestRegisterPDFDeterministic(t *testing.T) {
	a, b := draftFile(), draftFile()
	b.ID = "inc-20261121-2"
	for i := range b.Versions {
		b.Versions[i].Incident = b.ID
	}
	files := []audit.IncidentFile{a, b}
	meta := ReportMeta{Organization: audit.Organization{Name: "Société Québécoise inc.", NEQ: "1170000000"}, Generated: t0, Origin: "prod", From: 1, To: 10}
	var first []byte
	for i := 0; i < 8; i++ {
		var buf bytes.Buffer
		if err := WriteRegisterPDF(&buf, files, meta); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = buf.Bytes()
		} else if !bytes.Equal(first, buf.Bytes()) {
			t.Fatalf("rendering %d differs from the first", i)
		}
	}
	meta.Organization.NEQ = "1170000001"
	var buf bytes.Buffer
	if err := WriteRegisterPDF(&buf, files, meta); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(first, buf.Bytes()) {
		t.Error("another NEQ renders the same bytes")
	}
}

// PDFRenderer names the gopdf version go.mod requires: a gopdf upgrade
// changes the bytes, so it must change the renderer's name too.
func TestPDFRendererNamesGopdf(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`github.com/signintech/gopdf (v[^\s]+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod does not require gopdf")
	}
	if want := "gopdf/" + string(m[1]); !strings.HasSuffix(PDFRenderer, " "+want) {
		t.Errorf("PDFRenderer is %q, go.mod requires %s", PDFRenderer, want)
	}
}
