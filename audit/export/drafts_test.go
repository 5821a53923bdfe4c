package export

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
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
