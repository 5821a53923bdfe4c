package export

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// draftFile is an incident affecting two tenants, with the number of
// persons unknown and a measure taken and one planned.
func draftFile() audit.IncidentFile {
	risk := true
	v := audit.IncidentVersion{Incident: "inc-20261120-1", Version: 2, Status: audit.IncidentOpen, Source: audit.SourceIsolationViolation,
		PersonalInfo: "Représentations de requêtes (cache KV) d'un client", InfoCategories: []string{"contenu de requêtes", "identifiants"},
		Circumstances: "Une page de cache KV a été servie à une requête d'un autre locataire avant la détection par l'étiquette de propriété.",
		Cause:         "Réutilisation d'une page sans remise à zéro après un redémarrage du nœud.",
		Occurred:      audit.Period{Start: "2026-11-18", End: "2026-11-19", Approximate: true}, Awareness: audit.Period{Start: "2026-11-20"},
		PersonsUnknown: true, PersonsInQuebecUnknown: true, Type: audit.TypeUnauthorizedCommunication,
		Assessment: audit.Assessment{Status: audit.AssessmentCompleted, Sensitivity: "élevée", MaliciousUses: "usurpation", Consequences: "atteinte à la vie privée",
			Likelihood: "faible", RiskOfSeriousInjury: &risk, CompletedOn: "2026-11-21"},
		MeasuresTaken:     []audit.Measure{{What: "Nœud isolé et pages remises à zéro", Date: "2026-11-20"}},
		MeasuresPlanned:   []audit.Measure{{What: "Vérification de la remise à zéro au démarrage", Date: "2026-12-15"}},
		MeasuresSuggested: []audit.Measure{{What: "Changer les clés d'API transmises dans les requêtes"}},
		Organization:      audit.Organization{Name: "Cloison inc.", NEQ: "1170000000"},
		Contact:           audit.Contact{Name: "Élise Tremblay", Title: "Responsable de la protection des renseignements personnels", Email: "rprp@cloison.example"},
		AffectedTenants:   []cloison.TenantID{"alpha", "bravo"}, AffectedResponses: 3, LedgerEvents: []int64{41}}
	return audit.IncidentFile{ID: v.Incident, Source: v.Source, OpenedAt: t0, OpenedBy: "engine:node-1", LedgerSeq: 42,
		Versions: []audit.StoredVersion{{IncidentVersion: v, LedgerSeq: 44}}}
}

// TestDraftGolden holds each draft to its golden file (go test -update
// rewrites them): French first, then English, every element of the
// Règlement's s. 3 (Commission) or s. 4 (persons), "inconnu" for an
// unknown number of persons, and a client draft that names only its
// tenant.
func TestDraftGolden(t *testing.T) {
	f := draftFile()
	for _, kind := range DraftKinds {
		t.Run(string(kind), func(t *testing.T) {
			got, err := Draft(kind, f, audit.Organization{}, DraftClientOf{Tenant: "alpha", Contact: "dpo@alpha.example"})
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "draft-"+string(kind)+".txt")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Fatalf("draft %s differs from %s:\n%s", kind, golden, got)
			}
			fr, en := strings.Index(got, "FRANÇAIS"), strings.Index(got, "ENGLISH")
			if fr < 0 || en < fr {
				t.Fatalf("want French before English")
			}
			if kind != DraftPersons && !strings.Contains(got, "inconnu") {
				t.Fatalf("want the unknown number of persons as inconnu")
			}
			if kind == DraftClient && (strings.Contains(got, "bravo") || strings.Contains(got, "41") || !strings.Contains(got, "dpo@alpha.example")) {
				t.Fatalf("client draft names another tenant or a ledger seq, or lacks the contact")
			}
		})
	}
}

func TestDraftRefusals(t *testing.T) {
	f := draftFile()
	for _, c := range []struct {
		kind   DraftKind
		client cloison.TenantID
		want   error
	}{
		{"public", "", ErrDraftKind},
		{DraftClient, "", ErrDraftTenant},
		{DraftClient, "charlie", ErrDraftTenant},
	} {
		if _, err := Draft(c.kind, f, audit.Organization{}, DraftClientOf{Tenant: c.client}); !errors.Is(err, c.want) {
			t.Errorf("Draft(%s, %s): got %v, want %v", c.kind, c.client, err, c.want)
		}
	}
	if _, err := Draft(DraftCAI, audit.IncidentFile{ID: "x"}, audit.Organization{}, DraftClientOf{}); !errors.Is(err, audit.ErrInvalidIncident) {
		t.Errorf("no version: got %v", err)
	}
}

// TestRegisterSummary: the PDF's first page is the summary table, one row
// per incident with its status in French and English, its dates, its
// number of persons ("inconnu" when unknown) and its notices by recipient;
// the entries follow, each from a new page. The regime's citation heads
// the report. With pdftotext on the machine the rendered first page is
// read back too.
func TestRegisterSummary(t *testing.T) {
	a := draftFile()
	a.Notices = []audit.StoredNotice{
		{Notice: audit.Notice{Number: 1, Recipient: audit.RecipientCAI, SentAt: t0, Method: "portail"}},
		{Notice: audit.Notice{Number: 2, Recipient: audit.RecipientTenant, Tenant: "alpha", SentAt: t0, Method: "courriel"}},
		{Notice: audit.Notice{Number: 3, Recipient: audit.RecipientTenant, Tenant: "bravo", SentAt: t0, Method: "courriel"}},
	}
	b := draftFile()
	b.ID = "inc-20261125-2"
	v := b.Versions[0]
	v.Status, v.PersonsUnknown, v.PersonsConcerned, v.PersonsApproximate = audit.IncidentClosed, false, 12, true
	v.Occurred = audit.Period{Start: "2026-11-24"}
	b.Versions = []audit.StoredVersion{v}
	rows := summaryRows([]audit.IncidentFile{a, b})
	want := [][]string{
		{"inc-20261120-1", "ouvert / open", "2026-11-29", "2026-11-18 → 2026-11-19 (approx.)", "inconnu / unknown", "CAI 1 · clients 2"},
		{"inc-20261125-2", "fermé / closed", "2026-11-29", "2026-11-24", "12 (approx.)", "0"},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("summary rows:\ngot  %q\nwant %q", rows, want)
	}

	var buf bytes.Buffer
	if err := WriteRegisterPDF(&buf, []audit.IncidentFile{a, b}, ReportMeta{Organization: a.Latest().Organization, Generated: t0, Regime: RegimePublic}); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("CLOISON_PDF_OUT") != "" {
		if err := os.WriteFile(os.Getenv("CLOISON_PDF_OUT"), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := exec.LookPath("pdftotext"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("pdftotext not installed: make test-tools installs poppler-utils; CI must not skip this")
		}
		t.Log("pdftotext not installed: rendered text not checked")
		return
	}
	cmd := exec.Command("pdftotext", "-layout", "-f", "1", "-l", "1", "-", "-")
	cmd.Stdin = bytes.NewReader(buf.Bytes())
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	page1 := string(out)
	for _, s := range []string{"RLRQ c. A-2.1", "Sommaire des incidents", "inc-20261120-1", "inc-20261125-2", "fermé / closed", "inconnu /", "CAI 1 · clients 2"} {
		if !strings.Contains(page1, s) {
			t.Errorf("first page lacks %q:\n%s", s, page1)
		}
	}
	if strings.Contains(page1, "Renseignements personnels visés") {
		t.Errorf("first page holds an entry; want the summary only:\n%s", page1)
	}
}

// The report's subtitle cites the Règlement on one line of its own, under
// either regime: the citation used to follow the English title and wrap
// inside itself ("RLRQ c., r." | "3.1, art. 7").
func TestRegisterCitationOneLine(t *testing.T) {
	if _, err := exec.LookPath("pdftotext"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("pdftotext not installed: make test-tools installs poppler-utils; CI must not skip this")
		}
		t.Skip("pdftotext not installed: make test-tools installs poppler-utils")
	}
	for _, regime := range []Regime{RegimePrivate, RegimePublic} {
		t.Run(regime.String(), func(t *testing.T) {
			a := draftFile()
			var buf bytes.Buffer
			if err := WriteRegisterPDF(&buf, []audit.IncidentFile{a}, ReportMeta{Organization: a.Latest().Organization, Generated: t0, Regime: regime}); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("pdftotext", "-layout", "-f", "1", "-l", "1", "-", "-")
			cmd.Stdin = bytes.NewReader(buf.Bytes())
			out, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(string(out), "\n")
			want := regime.Citation() + ", art. 7"
			if len(lines) < 3 || strings.TrimSpace(lines[1]) != "Confidentiality incident register" || strings.TrimSpace(lines[2]) != want {
				t.Errorf("subtitle lines:\ngot  %q\nwant %q, %q", lines[:min(4, len(lines))], "Confidentiality incident register", want)
			}
		})
	}
}
