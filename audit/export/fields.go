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
// for what a notice to the Commission adds) and the Act, from the one
// table of citations (audit.Citations).
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
	f := func(fr, en string, c audit.Citation, value string) field {
		return field{fr + " (" + c.FR() + ")", en + " (" + c.EN() + ")", value}
	}
	return []field{
		{"Statut", "Status", label(string(v.Status))},
		{"Origine", "Source", label(string(v.Source))},
		f("Renseignements personnels visés", "Personal information concerned", audit.CiteRegisterInfo, v.PersonalInfo),
		f("Motif si non descriptibles", "Why it cannot be described", audit.CiteRegisterInfo, v.PersonalInfoUndescribed),
		f("Circonstances", "Circumstances", audit.CiteRegisterCircumstances, v.Circumstances),
		f("Date ou période de l'incident", "Date or period of the incident", audit.CiteRegisterOccurred, period(v.Occurred)),
		f("Date ou période de prise de connaissance", "Date or period of awareness", audit.CiteRegisterAwareness, period(v.Awareness)),
		f("Nombre de personnes concernées", "Number of persons concerned", audit.CiteRegisterPersons, persons),
		f("Évaluation du préjudice : état", "Injury assessment: status", audit.CiteRegisterAssessment, label(string(a.Status))),
		f("Sensibilité des renseignements", "Sensitivity of the information", audit.CiteRegisterAssessment, a.Sensitivity),
		f("Utilisations malveillantes possibles", "Possible malicious uses", audit.CiteRegisterAssessment, a.MaliciousUses),
		f("Conséquences appréhendées", "Anticipated consequences", audit.CiteRegisterAssessment, a.Consequences),
		f("Probabilité d'utilisation préjudiciable", "Likelihood of injurious use", audit.CiteRegisterAssessment, a.Likelihood),
		{"Risque de préjudice sérieux", "Risk of serious injury", risk},
		f("Personnes consultées", "Persons consulted", audit.CiteActAssessment, strings.Join(consulted, " ; ")),
		f("Avis à la Commission, dates", "Notices to the Commission, dates", audit.CiteRegisterNotices, noticeDates(notices, audit.RecipientCAI)),
		f("Avis aux personnes concernées, dates", "Notices to persons concerned, dates", audit.CiteRegisterNotices, noticeDates(notices, audit.RecipientPersons)),
		f("Avis public", "Public notice", audit.CiteRegisterNotices, yesNo(v.PublicNotice)),
		f("Motif de l'avis public", "Reason for public notice", audit.CiteRegisterNotices, v.PublicNoticeReason),
		f("Mesures prises pour diminuer le risque", "Measures taken to reduce the risk", audit.CiteRegisterMeasures, measures(v.MeasuresTaken)),
		f("Organisation et NEQ", "Organization and NEQ", audit.CiteCAIOrganization, strings.TrimSpace(v.Organization.Name+" "+v.Organization.NEQ)),
		f("Personne à joindre", "Contact person", audit.CiteCAIContact, contact),
		f("Cause", "Cause", audit.CiteCAICircumstances, v.Cause),
		f("Personnes résidant au Québec", "Persons residing in Québec", audit.CiteCAIPersons, inQuebec),
		f("Avis aux personnes : moyen et date", "Notice to persons: how and when", audit.CiteCAINotifyPersons, notif),
		f("Mesures prévues et échéances", "Measures planned and dates", audit.CiteCAIMeasures, measures(v.MeasuresPlanned)),
		f("Autorités hors Québec avisées", "Authorities outside Québec notified", audit.CiteCAIForeign, strings.Join(v.ForeignAuthorities, " ; ")),
		f("Avis aux clients", "Notices to clients (tenants)", audit.CiteActClientNotice, noticeDates(notices, audit.RecipientTenant)),
		{"Locataires touchés", "Affected tenants", strings.Join(tenants, " ; ")},
		{"Réponses retenues ou exposées", "Responses withheld or exposed", strconv.FormatInt(v.AffectedResponses, 10)},
		{"Événements du journal liés", "Linked ledger events", strings.Join(seqs, " ; ")},
		f("Type d'incident", "Incident type", audit.CiteActIncidentType, typeLabel(v.Type)),
		f("Catégories de renseignements", "Categories of personal information", audit.CiteCAIInfo, strings.Join(v.InfoCategories, " ; ")),
		f("Mesures suggérées aux personnes", "Measures suggested to persons", audit.CitePersonsSuggested, measures(v.MeasuresSuggested)),
		f("Communications sans consentement", "Communications without consent", audit.CiteActCommunications, strings.Join(comms, " ; ")),
		f("Report de l'avis aux personnes", "Notice to persons deferred", audit.CiteActDeferral, deferral),
		f("Consultation du responsable de la protection", "Privacy officer consulted", audit.CiteActAssessment, officer),
		{"Signalement", "Flag", flag},
	}
}
