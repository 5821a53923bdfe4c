package export

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cloison/cloison/audit"
)

// citationRE finds what reads as a citation in the register's labels and
// the drafts: the Regulation's articles and items, the Act's sections.
var citationRE = regexp.MustCompile(`Règlement, art\. \d+|Regulation s\. \d+|art\. [\d.]+(?:\(\d+\))?(?: al\. \d+)?(?: LPRPSP)?|(?:Act )?s\. [\d.]+(?:\(\d+\))?(?: para\. \d+)?`)

// TestCitationsSingleSource: every citation the register (the PDF's and
// CSV's labels) and the three drafts print is an entry of the one table
// (audit.Citations), in French or English; the elements the texts once
// cited under different numbers — authorities outside Québec, incident
// type, deferral of the notice to persons, communications without consent
// — are cited by the same entry in the register and in the CAI draft; the
// CAI draft's numbered elements are the Regulation's items of s. 3.
func TestCitationsSingleSource(t *testing.T) {
	allowed := map[string]bool{}
	for _, c := range audit.Citations {
		allowed[c.FR()], allowed[c.EN()] = true, true
	}
	f := draftFile()
	v := &f.Versions[0]
	v.PersonsNoticeDeferral = &audit.Deferral{Reason: "enquête policière en cours"}
	v.Communications = []audit.Communication{{To: "banque", What: "numéros", Reason: "bloquer", Date: "2026-11-21"}}
	var texts []string
	for _, fl := range registerFields(*v, nil, time.Time{}) {
		texts = append(texts, fl.fr, fl.en)
	}
	register := strings.Join(texts, "\n")
	drafts := map[DraftKind]string{}
	for _, kind := range []DraftKind{DraftCAI, DraftPersons, DraftClient} {
		d, err := Draft(kind, f, audit.Organization{}, DraftClientOf{Tenant: "alpha"})
		if err != nil {
			t.Fatal(err)
		}
		drafts[kind] = d
		texts = append(texts, d)
	}
	found := 0
	for _, text := range texts {
		for _, m := range citationRE.FindAllString(text, -1) {
			found++
			if !allowed[m] {
				t.Errorf("%q is cited but is not in audit.Citations", m)
			}
		}
	}
	if found < 40 {
		t.Errorf("found %d citations, want the register's and drafts' (the pattern matches nothing?)", found)
	}
	for _, c := range []audit.Citation{audit.CiteCAIForeign, audit.CiteActIncidentType, audit.CiteActDeferral, audit.CiteActCommunications} {
		if !strings.Contains(register, c.FR()) || !strings.Contains(register, c.EN()) {
			t.Errorf("the register does not cite %s / %s", c.FR(), c.EN())
		}
	}
	cai := drafts[DraftCAI]
	for _, want := range []string{audit.CiteActIncidentType.FR(), audit.CiteActDeferral.FR(), audit.CiteActIncidentType.EN(), audit.CiteActDeferral.EN(),
		audit.CiteCAIForeign.Item + ". Autorités hors Québec", audit.CiteCAIForeign.Item + ". Authorities outside Québec"} {
		if !strings.Contains(cai, want) {
			t.Errorf("the CAI draft lacks %q", want)
		}
	}
	// The numbered elements of the CAI draft are s. 3's items, each once
	// per language, 1 to 11.
	items := regexp.MustCompile(`(?m)^(\d+)\. `).FindAllStringSubmatch(cai, -1)
	if len(items) != 22 || items[0][1] != "1" || items[10][1] != audit.CiteCAIForeign.Item {
		t.Errorf("CAI draft items: %v", items)
	}
	if !strings.HasSuffix(RegimePrivate.Citation()+", art. "+audit.CiteRegister.Article, "r. 3.1, art. 7") {
		t.Error("the PDF's title does not cite the register's article of the table")
	}
}

// The CAI draft's risk section (Règlement s. 3(8)) states all four
// elements: sensitivity, possible malicious uses, consequences and their
// likelihood, each "to be completed" while unknown.
func TestDraftCAIRiskComplete(t *testing.T) {
	f := draftFile()
	d, err := Draft(DraftCAI, f, audit.Organization{}, DraftClientOf{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Sensibilité des renseignements : élevée", "Utilisations malveillantes possibles : usurpation",
		"Conséquences appréhendées : atteinte", "Probabilité d'une utilisation préjudiciable : faible",
		"Possible malicious uses : usurpation", "Likelihood of injurious use : faible"} {
		if !strings.Contains(d, want) {
			t.Errorf("CAI draft lacks %q", want)
		}
	}
	f.Versions[0].Assessment.MaliciousUses, f.Versions[0].Assessment.Likelihood = "", ""
	f.Versions[0].Assessment.Status, f.Versions[0].Assessment.RiskOfSeriousInjury = audit.AssessmentPending, nil
	if d, err = Draft(DraftCAI, f, audit.Organization{}, DraftClientOf{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d, "Utilisations malveillantes possibles : ["+todoFR+"]") || !strings.Contains(d, "Likelihood of injurious use : ["+todoEN+"]") {
		t.Errorf("unknown malicious uses or likelihood not marked to be completed:\n%s", d)
	}
}
