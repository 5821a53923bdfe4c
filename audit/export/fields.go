package export

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cloison/cloison/audit"
)

// field is one register element with its bilingual label (French first).
type field struct {
	fr, en, value string
}

func period(p audit.Period) string {
	if p.Start == "" {
		return ""
	}
	s := string(p.Start)
	if p.End != "" && p.End != p.Start {
		s += " → " + string(p.End)
	}
	if p.Approximate {
		s += " (approx.)"
	}
	return s
}

func measures(ms []audit.Measure) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.What
		if m.Date != "" {
			parts[i] = string(m.Date) + " : " + m.What
		}
	}
	return strings.Join(parts, " ; ")
}

func yesNo(b bool) string {
	if b {
		return "oui / yes"
	}
	return "non / no"
}

func recipientLabel(r audit.RecipientKind) string {
	switch r {
	case audit.RecipientCAI:
		return "Commission d'accès à l'information / CAI"
	case audit.RecipientPersons:
		return "personnes concernées / persons concerned"
	case audit.RecipientPublic:
		return "avis public / public notice"
	case audit.RecipientForeignAuthority:
		return "autorité hors Québec / authority outside Québec"
	case audit.RecipientTenant:
		return "client (locataire) / client (tenant)"
	}
	return string(r)
}

func noticeDates(ns []audit.StoredNotice, kind audit.RecipientKind) string {
	var ds []string
	for _, n := range ns {
		if n.Recipient == kind {
			ds = append(ds, n.SentAt.UTC().Format(time.DateOnly))
		}
	}
	return strings.Join(ds, " ; ")
}

// enumLabels gives each stored status and source in French with English.
var enumLabels = map[string]string{
	string(audit.IncidentOpen): "ouvert / open", string(audit.IncidentClosed): "fermé / closed",
	string(audit.IncidentUnderAssessment): "en évaluation / under assessment",
	string(audit.AssessmentPending):       "en cours / pending", string(audit.AssessmentCompleted): "terminée / completed",
	string(audit.SourceIsolationViolation): "violation d'isolation détectée / isolation violation detected",
	string(audit.SourceTransferFailure):    "échec de vérification d'un transfert / transfer verification failed",
	string(audit.SourceAdmin):              "inscrit par un administrateur / entered by an administrator",
	string(audit.SourceTenantReport):       "signalé par un locataire / reported by a tenant",
}

func label(s string) string {
	if l, ok := enumLabels[s]; ok {
		return l
	}
	return s
}

// count shows a number of persons: "inconnu / unknown" when unknown, never 0.
func count(n int64, approx, unknown bool) string {
	if unknown {
		return "inconnu / unknown"
	}
	s := strconv.FormatInt(n, 10)
	if approx {
		s += " (approx.)"
	}
	return s
}

func typeLabel(t audit.IncidentType) string {
	switch t {
	case audit.TypeUnauthorizedAccess:
		return "accès non autorisé / unauthorized access"
	case audit.TypeUnauthorizedUse:
		return "utilisation non autorisée / unauthorized use"
	case audit.TypeUnauthorizedCommunication:
		return "communication non autorisée / unauthorized communication"
	case audit.TypeLoss:
		return "perte / loss"
	case audit.TypeOther:
		return "autre atteinte à la protection / other breach"
	}
	return string(t)
}

// registerFields lists every element of the register for one version,
// citing the Règlement sur les incidents de confidentialité (s. 7, and s. 3
// for what a notice to the Commission adds).
func registerFields(v audit.StoredVersion, notices []audit.StoredNotice, opened time.Time) []field {
	a := v.Assessment
	risk := "en attente / pending"
	if a.RiskOfSeriousInjury != nil {
		risk = yesNo(*a.RiskOfSeriousInjury)
	}
	var consulted []string
	for _, c := range a.Consulted {
		consulted = append(consulted, string(c.Date)+" : "+c.Who)
	}
	tenants := make([]string, len(v.AffectedTenants))
	for i, t := range v.AffectedTenants {
		tenants[i] = string(t)
	}
	seqs := make([]string, len(v.LedgerEvents))
	for i, s := range v.LedgerEvents {
		seqs[i] = strconv.FormatInt(s, 10)
	}
	persons := count(v.PersonsConcerned, v.PersonsApproximate, v.PersonsUnknown)
	inQuebec := count(v.PersonsInQuebec, v.PersonsInQuebecApprox, v.PersonsInQuebecUnknown)
	var comms []string
	for _, c := range v.Communications {
		comms = append(comms, fmt.Sprintf("%s : %s — %s (%s)", c.Date, c.To, c.What, c.Reason))
	}
	deferral := ""
	if d := v.PersonsNoticeDeferral; d != nil {
		deferral = d.Reason
		if d.Until != "" {
			deferral += " (jusqu'au / until " + string(d.Until) + ")"
		}
	}
	officer := ""
	if c := v.PrivacyOfficerConsulted; c != nil {
		officer = string(c.Date) + " : " + c.Who
	}
	flag := ""
	if v.EarlyAwareness(opened) {
		flag = fmt.Sprintf("prise de connaissance plus de %d jours avant l'ouverture de l'entrée / awareness more than %d days before the entry was opened",
			audit.EarlyAwarenessDays, audit.EarlyAwarenessDays)
	}
	var parts []string
	for _, p := range []string{v.Contact.Name, v.Contact.Title, v.Contact.Phone, v.Contact.Email} {
		if strings.TrimSpace(p) != "" {
			parts = append(parts, strings.TrimSpace(p))
		}
	}
	contact := strings.Join(parts, " · ") // empty parts leave no separator
	notif := v.NotificationMethod
	if v.NotificationDate != "" {
		notif = strings.TrimSpace(string(v.NotificationDate) + " " + notif)
	}
	return []field{
		{"Statut", "Status", label(string(v.Status))},
		{"Origine", "Source", label(string(v.Source))},
		{"Renseignements personnels visés (art. 7(1))", "Personal information concerned (s. 7(1))", v.PersonalInfo},
		{"Motif si non descriptibles (art. 7(1))", "Why it cannot be described (s. 7(1))", v.PersonalInfoUndescribed},
		{"Circonstances (art. 7(2))", "Circumstances (s. 7(2))", v.Circumstances},
		{"Date ou période de l'incident (art. 7(3))", "Date or period of the incident (s. 7(3))", period(v.Occurred)},
		{"Date ou période de prise de connaissance (art. 7(4))", "Date or period of awareness (s. 7(4))", period(v.Awareness)},
		{"Nombre de personnes concernées (art. 7(5))", "Number of persons concerned (s. 7(5))", persons},
		{"Évaluation du préjudice : état (art. 7(6))", "Injury assessment: status (s. 7(6))", label(string(a.Status))},
		{"Sensibilité des renseignements (art. 7(6))", "Sensitivity of the information (s. 7(6))", a.Sensitivity},
		{"Utilisations malveillantes possibles (art. 7(6))", "Possible malicious uses (s. 7(6))", a.MaliciousUses},
		{"Conséquences appréhendées (art. 7(6))", "Anticipated consequences (s. 7(6))", a.Consequences},
		{"Probabilité d'utilisation préjudiciable (art. 7(6))", "Likelihood of injurious use (s. 7(6))", a.Likelihood},
		{"Risque de préjudice sérieux", "Risk of serious injury", risk},
		{"Personnes consultées (art. 3.7 LPRPSP)", "Persons consulted (Act s. 3.7)", strings.Join(consulted, " ; ")},
		{"Avis à la Commission, dates (art. 7(7))", "Notices to the Commission, dates (s. 7(7))", noticeDates(notices, audit.RecipientCAI)},
		{"Avis aux personnes concernées, dates (art. 7(7))", "Notices to persons concerned, dates (s. 7(7))", noticeDates(notices, audit.RecipientPersons)},
		{"Avis public (art. 7(7))", "Public notice (s. 7(7))", yesNo(v.PublicNotice)},
		{"Motif de l'avis public (art. 7(7))", "Reason for public notice (s. 7(7))", v.PublicNoticeReason},
		{"Mesures prises pour diminuer le risque (art. 7(8))", "Measures taken to reduce the risk (s. 7(8))", measures(v.MeasuresTaken)},
		{"Organisation et NEQ (art. 3(1))", "Organization and NEQ (s. 3(1))", strings.TrimSpace(v.Organization.Name + " " + v.Organization.NEQ)},
		{"Personne à joindre (art. 3(2))", "Contact person (s. 3(2))", contact},
		{"Cause (art. 3(4))", "Cause (s. 3(4))", v.Cause},
		{"Personnes résidant au Québec (art. 3(7))", "Persons residing in Québec (s. 3(7))", inQuebec},
		{"Avis aux personnes : moyen et date (art. 3(9))", "Notice to persons: how and when (s. 3(9))", notif},
		{"Mesures prévues et échéances (art. 3(10))", "Measures planned and dates (s. 3(10))", measures(v.MeasuresPlanned)},
		{"Autorités hors Québec avisées (art. 3(12))", "Authorities outside Québec notified (s. 3(12))", strings.Join(v.ForeignAuthorities, " ; ")},
		{"Avis aux clients (art. 18.3)", "Notices to clients (tenants) (s. 18.3)", noticeDates(notices, audit.RecipientTenant)},
		{"Locataires touchés", "Affected tenants", strings.Join(tenants, " ; ")},
		{"Réponses retenues ou exposées", "Responses withheld or exposed", strconv.FormatInt(v.AffectedResponses, 10)},
		{"Événements du journal liés", "Linked ledger events", strings.Join(seqs, " ; ")},
		{"Type d'incident (art. 3(3))", "Incident type (s. 3(3))", typeLabel(v.Type)},
		{"Catégories de renseignements (art. 3(3))", "Categories of personal information (s. 3(3))", strings.Join(v.InfoCategories, " ; ")},
		{"Mesures suggérées aux personnes (art. 4(5))", "Measures suggested to persons (s. 4(5))", measures(v.MeasuresSuggested)},
		{"Communications sans consentement (art. 3.5 al. 3 LPRPSP)", "Communications without consent (Act s. 3.5 par. 3)", strings.Join(comms, " ; ")},
		{"Report de l'avis aux personnes (art. 3.6 LPRPSP)", "Notice to persons deferred (Act s. 3.6)", deferral},
		{"Consultation du responsable de la protection (art. 3.7 LPRPSP)", "Privacy officer consulted (Act s. 3.7)", officer},
		{"Signalement", "Flag", flag},
	}
}
