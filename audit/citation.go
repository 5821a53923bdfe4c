package audit

import "fmt"

// Law is the text a Citation cites.
type Law string

// Laws.
const (
	// LawAct: the Act respecting the protection of personal information in
	// the private sector (Loi sur la protection des renseignements
	// personnels dans le secteur privé, RLRQ c. P-39.1, "LPRPSP"), as
	// amended by Loi 25.
	LawAct Law = "act"
	// LawRegulation: the Regulation respecting confidentiality incidents
	// (Règlement sur les incidents de confidentialité, RLRQ c. P-39.1,
	// r. 3.1).
	LawRegulation Law = "regulation"
)

// Citation is one provision of the Act or the Regulation. Every citation
// Cloison prints — in the register's PDF and CSV labels, the notice
// drafts, and the errors of Validate — is one of the Cite* values below
// and is written by FR or EN: one table, so that the same element is never
// cited under two numbers.
type Citation struct {
	Law     Law
	Article string // "3.5", "7"
	// Item is the Regulation's numbered paragraph ("1" for 1°), Alinea
	// the Act's paragraph (alinéa); at most one is set.
	Item, Alinea string
}

// FR is the French citation: "art. 7(1)" for an item of the Regulation
// (the register and the drafts name the Regulation in their heading),
// "Règlement, art. 3" for a whole article, "art. 3.5 al. 3 LPRPSP" for
// the Act.
func (c Citation) FR() string {
	switch {
	case c.Law == LawAct && c.Alinea != "":
		return fmt.Sprintf("art. %s al. %s LPRPSP", c.Article, c.Alinea)
	case c.Law == LawAct:
		return fmt.Sprintf("art. %s LPRPSP", c.Article)
	case c.Item != "":
		return fmt.Sprintf("art. %s(%s)", c.Article, c.Item)
	}
	return "Règlement, art. " + c.Article
}

// EN is the English citation: "s. 7(1)", "Regulation s. 3", "Act s. 3.5
// para. 3".
func (c Citation) EN() string {
	switch {
	case c.Law == LawAct && c.Alinea != "":
		return fmt.Sprintf("Act s. %s para. %s", c.Article, c.Alinea)
	case c.Law == LawAct:
		return "Act s. " + c.Article
	case c.Item != "":
		return fmt.Sprintf("s. %s(%s)", c.Article, c.Item)
	}
	return "Regulation s. " + c.Article
}

func reg(art, item string) Citation { return Citation{Law: LawRegulation, Article: art, Item: item} }
func act(art, al string) Citation   { return Citation{Law: LawAct, Article: art, Alinea: al} }

// The citations. The Act (P-39.1, as amended by Loi 25): art. 3.5 al. 1
// and 2, the measures and the notices to the Commission and to the persons
// concerned, and (al. 2) the communication without consent to whoever can
// reduce the risk; al. 3, notice to a person deferred while it could
// hamper an investigation; art. 3.6, what a confidentiality incident is
// (access, use, communication not authorized by law, loss, other breach);
// art. 3.7, the assessment of the risk of serious injury and the
// consultation of the privacy officer; art. 3.8, the register; art. 18.3,
// the service provider's notice to its client. The Regulation: s. 3, the
// notice to the Commission, items 1° to 11°; s. 4, the notice to the
// persons concerned; s. 7, the register, items 1° to 8°. Under the public
// regime (A-2.1, r. 3.1) the Regulation's numbers are the same; the Act's
// are those of the private sector's, as the labels say (LPRPSP).
var (
	CiteActNotices        = act("3.5", "")
	CiteActCommunications = act("3.5", "2")
	CiteActDeferral       = act("3.5", "3")
	CiteActIncidentType   = act("3.6", "")
	CiteActAssessment     = act("3.7", "")
	CiteActRegister       = act("3.8", "")
	CiteActClientNotice   = act("18.3", "")

	CiteCAINotice        = reg("3", "")
	CiteCAIOrganization  = reg("3", "1")
	CiteCAIContact       = reg("3", "2")
	CiteCAIInfo          = reg("3", "3") // the personal information and its categories
	CiteCAICircumstances = reg("3", "4") // circumstances and cause
	CiteCAIOccurred      = reg("3", "5")
	CiteCAIAwareness     = reg("3", "6")
	CiteCAIPersons       = reg("3", "7") // and how many reside in Québec
	CiteCAIRisk          = reg("3", "8") // sensitivity, malicious uses, consequences, likelihood
	CiteCAINotifyPersons = reg("3", "9")
	CiteCAIMeasures      = reg("3", "10") // taken and planned, with dates
	CiteCAIForeign       = reg("3", "11") // authorities outside Québec notified

	CitePersonsNotice        = reg("4", "")
	CitePersonsInfo          = reg("4", "1")
	CitePersonsCircumstances = reg("4", "2")
	CitePersonsOccurred      = reg("4", "3")
	CitePersonsMeasures      = reg("4", "4") // taken or planned to reduce the risk
	CitePersonsSuggested     = reg("4", "5")
	CitePersonsContact       = reg("4", "6")

	CiteRegister              = reg("7", "")
	CiteRegisterInfo          = reg("7", "1")
	CiteRegisterCircumstances = reg("7", "2")
	CiteRegisterOccurred      = reg("7", "3")
	CiteRegisterAwareness     = reg("7", "4")
	CiteRegisterPersons       = reg("7", "5")
	CiteRegisterAssessment    = reg("7", "6")
	CiteRegisterNotices       = reg("7", "7")
	CiteRegisterMeasures      = reg("7", "8")
)

// Citations lists every citation of the table.
var Citations = []Citation{
	CiteActNotices, CiteActCommunications, CiteActDeferral, CiteActIncidentType, CiteActAssessment, CiteActRegister, CiteActClientNotice,
	CiteCAINotice, CiteCAIOrganization, CiteCAIContact, CiteCAIInfo, CiteCAICircumstances, CiteCAIOccurred, CiteCAIAwareness,
	CiteCAIPersons, CiteCAIRisk, CiteCAINotifyPersons, CiteCAIMeasures, CiteCAIForeign,
	CitePersonsNotice, CitePersonsInfo, CitePersonsCircumstances, CitePersonsOccurred, CitePersonsMeasures, CitePersonsSuggested, CitePersonsContact,
	CiteRegister, CiteRegisterInfo, CiteRegisterCircumstances, CiteRegisterOccurred, CiteRegisterAwareness, CiteRegisterPersons,
	CiteRegisterAssessment, CiteRegisterNotices, CiteRegisterMeasures,
}
