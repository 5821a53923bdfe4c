package audit

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func contentVersion() IncidentVersion {
	risk := false
	return IncidentVersion{Incident: "inc-1", Version: 1, Status: IncidentOpen, Source: SourceAdmin,
		PersonalInfo: "adresses courriel", Circumstances: "courriel mal adressé",
		Occurred: Period{Start: "2026-11-01"}, Awareness: Period{Start: "2026-11-02"},
		Assessment: Assessment{Status: AssessmentCompleted, RiskOfSeriousInjury: &risk, Sensitivity: "faible",
			MaliciousUses: "hameçonnage", Consequences: "pourriels", Likelihood: "faible", CompletedOn: "2026-11-03"},
		Type:                    TypeUnauthorizedCommunication,
		PrivacyOfficerConsulted: &Consultation{Who: "Élise Côté, responsable", Date: "2026-11-03"},
	}
}

// Each element of a register version is validated with a named refusal
// (ErrInvalidIncident, a 400 at the API).
func TestRegisterContentValidation(t *testing.T) {
	tomorrow := DayOf(time.Now().AddDate(0, 0, 1))
	tests := []struct {
		name string
		edit func(*IncidentVersion)
		ok   bool
	}{
		{"valid", func(*IncidentVersion) {}, true},
		{"occurred after awareness", func(v *IncidentVersion) { v.Occurred.Start = "2026-11-05" }, false},
		{"awareness in the future", func(v *IncidentVersion) { v.Awareness.Start = tomorrow; v.Occurred.Start = tomorrow }, false},
		{"assessment completed in the future", func(v *IncidentVersion) { v.Assessment.CompletedOn = tomorrow }, false},
		{"unknown type", func(v *IncidentVersion) { v.Type = "theft" }, false},
		{"completed without the privacy officer (art. 3.7)", func(v *IncidentVersion) { v.PrivacyOfficerConsulted = nil }, false},
		{"privacy officer consulted before awareness", func(v *IncidentVersion) { v.PrivacyOfficerConsulted.Date = "2026-10-01" }, false},
		{"persons unknown and counted", func(v *IncidentVersion) { v.PersonsUnknown, v.PersonsConcerned = true, 3 }, false},
		{"persons unknown", func(v *IncidentVersion) { v.PersonsUnknown = true }, true},
		{"communication without reason", func(v *IncidentVersion) {
			v.Communications = []Communication{{To: "banque", What: "numéros de carte", Date: "2026-11-03"}}
		}, false},
		{"communication", func(v *IncidentVersion) {
			v.Communications = []Communication{{To: "banque", What: "numéros de carte", Reason: "bloquer les cartes", Date: "2026-11-03"}}
		}, true},
		{"deferral without reason", func(v *IncidentVersion) { v.PersonsNoticeDeferral = &Deferral{} }, false},
		{"empty category", func(v *IncidentVersion) { v.InfoCategories = []string{" "} }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := contentVersion()
			tt.edit(&v)
			err := v.Validate()
			if tt.ok && err != nil {
				t.Errorf("got %v, want valid", err)
			}
			if !tt.ok && !errors.Is(err, ErrInvalidIncident) {
				t.Errorf("got %v, want ErrInvalidIncident", err)
			}
		})
	}
}

// Versions written before the Règlement's detailed fields keep their canonical bytes: the
// new fields are omitted when empty.
func TestRegisterContentOmittedWhenEmpty(t *testing.T) {
	v := contentVersion()
	v.Type, v.PrivacyOfficerConsulted = "", nil
	b, _, err := v.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"type", "info_categories", "persons_unknown", "measures_suggested", "communications", "persons_notice_deferral", "privacy_officer_consulted"} {
		if containsKey(b, f) {
			t.Errorf("empty %s is in the canonical content", f)
		}
	}
}

func containsKey(b []byte, k string) bool { return strings.Contains(string(b), `"`+k+`":`) }

func TestNoticeDateAndEarlyAwareness(t *testing.T) {
	v := contentVersion()
	now := time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		sent time.Time
		ok   bool
	}{
		{time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC), true},
		{time.Date(2026, 11, 1, 23, 0, 0, 0, time.UTC), false},
		{now.Add(time.Hour), false},
	} {
		if err := v.CheckNoticeDate(tt.sent, now); (err == nil) != tt.ok {
			t.Errorf("sent %s: got %v", tt.sent, err)
		}
	}
	if v.EarlyAwareness(time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)) || !v.EarlyAwareness(time.Date(2027, 1, 20, 0, 0, 0, 0, time.UTC)) {
		t.Error("early awareness flag wrong")
	}
}
