package export

import (
	"time"

	"errors"
	"fmt"
	"strings"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// DraftKind names a notice draft (Draft).
type DraftKind string

// Draft kinds: the notice to the Commission d'accès à l'information
// (Loi 25 art. 3.5; Règlement s. 3), the notice to the persons concerned
// (art. 3.5; Règlement s. 4) and the provider's notice to its client
// tenant (art. 18.3).
const (
	DraftCAI     DraftKind = "cai"
	DraftPersons DraftKind = "persons"
	DraftClient  DraftKind = "client"
)

// DraftKinds lists every draft kind.
var DraftKinds = []DraftKind{DraftCAI, DraftPersons, DraftClient}

// ErrDraftKind is a draft kind Draft does not know; ErrDraftTenant a client
// draft without a tenant, or for a tenant the incident does not affect.
var (
	ErrDraftKind   = errors.New("export: unknown draft kind")
	ErrDraftTenant = errors.New("export: a client draft names an affected tenant")
)

// DraftClientOf says to whom a client draft (DraftClient) is addressed: the
// tenant and its incident contact (tenancy.Tenant.IncidentContact), and
// the notice's due time under the tenant's contract (audit.NoticeDue.DueAt;
// nil when its contract sets no deadline).
type DraftClientOf struct {
	Tenant  cloison.TenantID
	Contact string
	Due     *time.Time
}

// Draft writes a draft of a notice about f's current version, in French
// then in English (plain text, for a person to review, complete and send;
// nothing is recorded). org is the organisation that gives the notice;
// when empty, the version's own (s. 3(1)). An element not yet known reads
// "à compléter / to be completed", a number of persons not known "inconnu
// / unknown" (never 0). A client draft (DraftClient) is addressed to
// client.Tenant, which must be among the version's affected tenants; it
// counts the other affected tenants without naming them and carries no
// ledger sequence numbers, so it can be shown to that tenant.
func Draft(kind DraftKind, f audit.IncidentFile, org audit.Organization, client DraftClientOf) (string, error) {
	if len(f.Versions) == 0 {
		return "", fmt.Errorf("%w: incident %s has no version", audit.ErrInvalidIncident, f.ID)
	}
	v := f.Latest().IncidentVersion
	if strings.TrimSpace(org.Name) == "" {
		org = v.Organization
	}
	d := &draft{v: v, id: f.ID, org: org}
	switch kind {
	case DraftCAI:
		d.cai()
	case DraftPersons:
		d.persons()
	case DraftClient:
		others := 0
		own := false
		for _, t := range uniqTenants(v.AffectedTenants) {
			if t == client.Tenant {
				own = true
			} else {
				others++
			}
		}
		if client.Tenant == "" || !own {
			return "", ErrDraftTenant
		}
		d.client(client, others)
	default:
		return "", fmt.Errorf("%w %q (want one of %v)", ErrDraftKind, kind, DraftKinds)
	}
	return d.b.String(), nil
}

func uniqTenants(ts []cloison.TenantID) []cloison.TenantID {
	var out []cloison.TenantID
	seen := map[cloison.TenantID]bool{}
	for _, t := range ts {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

const (
	todoFR = "à compléter"
	todoEN = "to be completed"
)

type draft struct {
	v   audit.IncidentVersion
	id  audit.Name
	org audit.Organization
	b   strings.Builder
}

func (d *draft) line(format string, a ...any) { fmt.Fprintf(&d.b, format+"\n", a...) }

// item writes "label : value", the value or the placeholder when empty.
func (d *draft) item(label, value, todo string) {
	if strings.TrimSpace(value) == "" {
		value = "[" + todo + "]"
	}
	d.line("%s : %s", label, value)
}

func orgLine(o audit.Organization) string {
	s := strings.TrimSpace(o.Name)
	if o.NEQ != "" {
		s += " (NEQ " + o.NEQ + ")"
	}
	return s
}

func contactLine(c audit.Contact) string {
	var parts []string
	for _, p := range []string{c.Name, c.Title, c.Phone, c.Email} {
		if strings.TrimSpace(p) != "" {
			parts = append(parts, strings.TrimSpace(p))
		}
	}
	return strings.Join(parts, ", ")
}

// lang picks a bilingual pair "fr / en" made by the field helpers.
func lang(pair string, en bool) string {
	fr, e, ok := strings.Cut(pair, " / ")
	if !ok {
		return pair
	}
	if en {
		return e
	}
	return fr
}

func persons(n int64, approx, unknown, en bool) string {
	return lang(count(n, approx, unknown), en)
}

func periodText(p audit.Period, en bool) string {
	s := period(p)
	if en {
		return s
	}
	return strings.ReplaceAll(s, "(approx.)", "(approximatif)")
}

func (d *draft) info(en bool) string {
	s := d.v.PersonalInfo
	if strings.TrimSpace(s) == "" {
		s = d.v.PersonalInfoUndescribed
	}
	if len(d.v.InfoCategories) > 0 {
		cat := "Catégories : "
		if en {
			cat = "Categories: "
		}
		s = strings.TrimSpace(s + "\n  " + cat + strings.Join(d.v.InfoCategories, ", "))
	}
	return s
}

func (d *draft) header(fr, en string) {
	d.line("%s", fr)
	d.line("%s", en)
	d.line("Incident %s · version %d", d.id, d.v.Version)
	d.line("")
	d.line("BROUILLON — à relire et compléter avant l'envoi. / DRAFT — review and complete before sending.")
	d.line("")
}

// n numbers a draft's element by its item of the Regulation ("3. " for
// 3°), from the table of citations.
func n(c audit.Citation) string { return c.Item + ". " }

const sep = "----------------------------------------------------------------------"

// tr picks the French or the English of a label.
type tr func(fr, en string) string

// bilingual writes body twice, French first then English, each under its
// heading; todo is the "to be completed" mark in that language.
func (d *draft) bilingual(body func(en bool, t tr, todo string)) {
	for _, en := range []bool{false, true} {
		t := func(fr, e string) string {
			if en {
				return e
			}
			return fr
		}
		if en {
			d.line("%s", sep)
			d.line("ENGLISH")
		} else {
			d.line("FRANÇAIS")
		}
		body(en, t, t(todoFR, todoEN))
	}
}

// cai is the notice to the Commission (Règlement s. 3).
func (d *draft) cai() {
	v := d.v
	d.header("AVIS À LA COMMISSION D'ACCÈS À L'INFORMATION — incident de confidentialité ("+audit.CiteActNotices.FR()+" ; "+audit.CiteCAINotice.FR()+")",
		"NOTICE TO THE COMMISSION D'ACCÈS À L'INFORMATION — confidentiality incident ("+audit.CiteActNotices.EN()+"; "+audit.CiteCAINotice.EN()+")")
	d.bilingual(func(en bool, t tr, todo string) {
		d.item(t(n(audit.CiteCAIOrganization)+"Organisation et NEQ", n(audit.CiteCAIOrganization)+"Organization and NEQ"), orgLine(d.org), todo)
		d.item(t(n(audit.CiteCAIContact)+"Personne à joindre", n(audit.CiteCAIContact)+"Contact person"), contactLine(v.Contact), todo)
		d.item(t(n(audit.CiteCAIInfo)+"Renseignements personnels visés", n(audit.CiteCAIInfo)+"Personal information concerned"), d.info(en), todo)
		d.item(t("   Type d'incident ("+audit.CiteActIncidentType.FR()+")", "   Type of incident ("+audit.CiteActIncidentType.EN()+")"), lang(typeLabel(v.Type), en), todo)
		d.item(t(n(audit.CiteCAICircumstances)+"Circonstances", n(audit.CiteCAICircumstances)+"Circumstances"), v.Circumstances, todo)
		d.item(t("   Cause", "   Cause"), v.Cause, t("inconnue ou à compléter", "unknown or to be completed"))
		d.item(t(n(audit.CiteCAIOccurred)+"Date ou période de l'incident", n(audit.CiteCAIOccurred)+"Date or period of the incident"), periodText(v.Occurred, en), todo)
		d.item(t(n(audit.CiteCAIAwareness)+"Date ou période de prise de connaissance", n(audit.CiteCAIAwareness)+"Date or period of awareness"), periodText(v.Awareness, en), todo)
		d.item(t(n(audit.CiteCAIPersons)+"Nombre de personnes concernées", n(audit.CiteCAIPersons)+"Number of persons concerned"), persons(v.PersonsConcerned, v.PersonsApproximate, v.PersonsUnknown, en), todo)
		d.item(t("   dont résidant au Québec", "   of whom residing in Québec"), persons(v.PersonsInQuebec, v.PersonsInQuebecApprox, v.PersonsInQuebecUnknown, en), todo)
		risk := t("évaluation en cours", "assessment pending")
		if r := v.Assessment.RiskOfSeriousInjury; r != nil {
			risk = lang(yesNo(*r), en)
		}
		d.item(t(n(audit.CiteCAIRisk)+"Risque de préjudice sérieux", n(audit.CiteCAIRisk)+"Risk of serious injury"), risk, todo)
		d.item(t("   Sensibilité des renseignements", "   Sensitivity of the information"), v.Assessment.Sensitivity, todo)
		d.item(t("   Utilisations malveillantes possibles", "   Possible malicious uses"), v.Assessment.MaliciousUses, todo)
		d.item(t("   Conséquences appréhendées", "   Anticipated consequences"), v.Assessment.Consequences, todo)
		d.item(t("   Probabilité d'une utilisation préjudiciable", "   Likelihood of injurious use"), v.Assessment.Likelihood, todo)
		notif := strings.TrimSpace(string(v.NotificationDate) + " " + v.NotificationMethod)
		if dfr := v.PersonsNoticeDeferral; dfr != nil && notif == "" {
			notif = t("avis différé ("+audit.CiteActDeferral.FR()+") : ", "notice deferred ("+audit.CiteActDeferral.EN()+"): ") + dfr.Reason
		}
		d.item(t(n(audit.CiteCAINotifyPersons)+"Avis aux personnes : moyen et date", n(audit.CiteCAINotifyPersons)+"Notice to persons: how and when"), notif, todo)
		d.item(t(n(audit.CiteCAIMeasures)+"Mesures prises", n(audit.CiteCAIMeasures)+"Measures taken"), measures(v.MeasuresTaken), todo)
		d.item(t("    Mesures prévues et échéances", "    Measures planned and dates"), measures(v.MeasuresPlanned), todo)
		d.item(t(n(audit.CiteCAIForeign)+"Autorités hors Québec avisées", n(audit.CiteCAIForeign)+"Authorities outside Québec notified"), strings.Join(v.ForeignAuthorities, ", "), t("aucune", "none"))
		d.line("")
	})
}

// persons is the notice to the persons concerned (Règlement s. 4).
func (d *draft) persons() {
	v := d.v
	d.header("AVIS AUX PERSONNES CONCERNÉES — incident de confidentialité ("+audit.CiteActNotices.FR()+" ; "+audit.CitePersonsNotice.FR()+")",
		"NOTICE TO THE PERSONS CONCERNED — confidentiality incident ("+audit.CiteActNotices.EN()+"; "+audit.CitePersonsNotice.EN()+")")
	d.bilingual(func(en bool, t tr, todo string) {
		if en {
			d.line("%s informs you of a confidentiality incident involving personal information about you.", orOr(orgLine(d.org), "[organization]"))
		} else {
			d.line("%s vous informe d'un incident de confidentialité touchant des renseignements personnels vous concernant.", orOr(orgLine(d.org), "[organisation]"))
		}
		d.line("")
		d.item(t(n(audit.CitePersonsInfo)+"Renseignements visés", n(audit.CitePersonsInfo)+"Information concerned"), d.info(en), todo)
		d.item(t(n(audit.CitePersonsCircumstances)+"Circonstances", n(audit.CitePersonsCircumstances)+"Circumstances"), v.Circumstances, todo)
		d.item(t(n(audit.CitePersonsOccurred)+"Date ou période de l'incident", n(audit.CitePersonsOccurred)+"Date or period of the incident"), periodText(v.Occurred, en), todo)
		d.item(t(n(audit.CitePersonsMeasures)+"Mesures prises ou prévues pour diminuer le risque de préjudice", n(audit.CitePersonsMeasures)+"Measures taken or planned to reduce the risk of injury"),
			strings.Trim(measures(v.MeasuresTaken)+" ; "+measures(v.MeasuresPlanned), " ;"), todo)
		d.item(t(n(audit.CitePersonsSuggested)+"Mesures que nous vous suggérons", n(audit.CitePersonsSuggested)+"Measures we suggest you take"), measures(v.MeasuresSuggested), todo)
		d.item(t(n(audit.CitePersonsContact)+"Pour nous joindre", n(audit.CitePersonsContact)+"How to reach us"), contactLine(v.Contact), todo)
		d.line("")
	})
}

// client is the provider's notice to a client tenant (art. 18.3).
func (d *draft) client(c DraftClientOf, others int) {
	v := d.v
	d.header("AVIS AU CLIENT — incident de confidentialité chez le prestataire ("+audit.CiteActClientNotice.FR()+")",
		"NOTICE TO THE CLIENT — confidentiality incident at the service provider ("+audit.CiteActClientNotice.EN()+")")
	d.bilingual(func(en bool, t tr, todo string) {
		to := string(c.Tenant)
		if strings.TrimSpace(c.Contact) != "" {
			to += " — " + strings.TrimSpace(c.Contact)
		}
		d.item(t("Destinataire", "To"), to, todo)
		d.item(t("Prestataire", "Provider"), orgLine(d.org), todo)
		if en {
			d.line("We inform you without delay, as the Act requires (%s), of a confidentiality incident that concerns information we hold on your behalf.", audit.CiteActClientNotice.EN())
		} else {
			d.line("Nous vous avisons sans délai, comme l'exige la Loi (%s), d'un incident de confidentialité touchant des renseignements que nous détenons pour votre compte.", audit.CiteActClientNotice.FR())
		}
		d.item(t("Renseignements visés", "Information concerned"), d.info(en), todo)
		d.item(t("Circonstances", "Circumstances"), v.Circumstances, todo)
		if c.Due != nil {
			d.item(t("Échéance contractuelle de cet avis", "Contractual deadline of this notice"), c.Due.UTC().Format(time.RFC3339), todo)
		}
		d.item(t("Date ou période de l'incident", "Date or period of the incident"), periodText(v.Occurred, en), todo)
		d.item(t("Date de prise de connaissance", "Date of awareness"), periodText(v.Awareness, en), todo)
		if m := draftModel(v.DetectionGroup); m != "" {
			d.item(t("Modèle en cause", "Model concerned"), m, todo)
		}
		d.item(t("Nombre de personnes concernées", "Number of persons concerned"), persons(v.PersonsConcerned, v.PersonsApproximate, v.PersonsUnknown, en), todo)
		d.item(t("Réponses retenues ou exposées", "Responses withheld or exposed"), fmt.Sprint(v.AffectedResponses), todo)
		d.item(t("Autres clients touchés (nombre)", "Other clients affected (number)"), fmt.Sprint(others), todo)
		d.item(t("Mesures prises", "Measures taken"), measures(v.MeasuresTaken), todo)
		d.item(t("Mesures prévues", "Measures planned"), measures(v.MeasuresPlanned), todo)
		d.item(t("Personne à joindre", "Contact person"), contactLine(v.Contact), todo)
		if en {
			d.line("As the person responsible for this information, you assess the risk of serious injury and give the notices (%s) that fall to you.", audit.CiteActNotices.EN())
		} else {
			d.line("À titre de responsable de ces renseignements, il vous revient d'évaluer le risque de préjudice sérieux et de donner les avis (%s) qui vous incombent.", audit.CiteActNotices.FR())
		}
		d.line("")
	})
}

// draftModel is the model an automatic entry's cause names
// (audit.Detection.GroupKey: source/invariant/model), "" when none.
func draftModel(group string) string {
	parts := strings.SplitN(group, "/", 3)
	if len(parts) != 3 {
		return ""
	}
	return parts[2]
}

func orOr(s, dflt string) string {
	if strings.TrimSpace(s) == "" {
		return dflt
	}
	return s
}
