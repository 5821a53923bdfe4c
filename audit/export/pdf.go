package export

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/signintech/gopdf"
	"golang.org/x/image/font/gofont/gobold"
	"golang.org/x/image/font/gofont/goregular"

	"github.com/cloison/cloison/audit"
)

// PDFRenderer names the renderer of register.pdf, recorded in
// register.jsonl's register line: the PDF is a pure function of
// register.jsonl and the manifest, so a verifier re-renders it and
// compares bytes, which only the same renderer (this layout code and the
// same gopdf) can do. Change the version whenever the layout or the gopdf
// version changes (TestPDFRendererNamesGopdf holds it to go.mod).
const PDFRenderer = "cloison-register-pdf/2 gopdf/v0.33.0"

// ReportMeta is what the register report states about itself.
type ReportMeta struct {
	Organization audit.Organization
	Generated    time.Time
	Origin       audit.Name
	From, To     uint64       // ledger range exported with it (0 0: none)
	Head         audit.Digest // ledger hash at To
	// Regime is the statute the register is kept under: RegimePrivate
	// (the default) or RegimePublic.
	Regime Regime
}

// Regime says which act the register is kept under; the Règlement sur les
// incidents de confidentialité is cited under it.
type Regime string

// Regimes.
const (
	RegimePrivate Regime = "private" // Loi sur la protection des renseignements personnels dans le secteur privé
	RegimePublic  Regime = "public"  // Loi sur l'accès aux documents des organismes publics
)

// ErrRegime is a regime other than private or public.
var ErrRegime = errors.New("export: register regime must be private or public")

// String returns r; empty reads as private.
func (r Regime) String() string {
	if r == "" {
		return string(RegimePrivate)
	}
	return string(r)
}

// Set parses a regime (flag.Value): "private" or "public", nothing else.
func (r *Regime) Set(s string) error {
	switch Regime(s) {
	case RegimePrivate, RegimePublic:
		*r = Regime(s)
		return nil
	}
	return fmt.Errorf("%w (got %q)", ErrRegime, s)
}

// Type names the value for command-line help (pflag.Value).
func (r *Regime) Type() string { return "private|public" }

// Citation returns the regulation's citation under r.
func (r Regime) Citation() string {
	if r == RegimePublic {
		return "Règlement sur les incidents de confidentialité, RLRQ c. A-2.1, r. 3.1"
	}
	return "Règlement sur les incidents de confidentialité, RLRQ c. P-39.1, r. 3.1"
}

// Page geometry, in points (A4).
const (
	pageW, pageH   = 595.28, 841.89
	margin         = 42.0
	labelW         = 185.0
	gap            = 10.0
	lineH          = 11.5
	bodySize       = 8.5
	headSize       = 12.0
	footerY        = pageH - 28
	contentBottom  = pageH - 48
	fontRegular    = "go"
	fontBold       = "go-bold"
	emptyValueText = "" // an empty element is shown empty
)

// reportMeta is the PDF's header for the export m with the register line
// head: nothing but what the manifest and register.jsonl state, so that
// Write and VerifyDir render the same bytes.
func reportMeta(m Manifest, head RegisterHead) (ReportMeta, error) {
	org, err := head.Organization()
	if err != nil {
		return ReportMeta{}, fmt.Errorf("%w: register settings: %v", ErrVerify, err)
	}
	return ReportMeta{Organization: org, Generated: m.Created, Origin: m.Origin, From: m.From, To: m.To, Head: m.Head, Regime: head.Regime}, nil
}

// RenderRegisterPDF renders register.pdf for the export m from what
// register.jsonl holds (head and files): the same inputs give the same
// bytes (no clock, no random identifier; the creation date is the
// manifest's).
func RenderRegisterPDF(w io.Writer, m Manifest, head RegisterHead, files []audit.IncidentFile) error {
	meta, err := reportMeta(m, head)
	if err != nil {
		return err
	}
	return WriteRegisterPDF(w, files, meta)
}

// WriteRegisterPDF writes a human-readable report of the register: a
// summary table of every incident (summaryRows), then each incident's
// current version with every element of the Règlement's s. 7
// (and s. 3), labelled in French first with the English beside it, then
// the version history and the notices. It embeds the Go fonts (TrueType,
// with every Latin-1 and Latin Extended-A letter French needs).
func WriteRegisterPDF(w io.Writer, files []audit.IncidentFile, meta ReportMeta) error {
	pdf := &gopdf.GoPdf{}
	pdf.Start(gopdf.Config{PageSize: *gopdf.PageSizeA4})
	pdf.SetInfo(gopdf.PdfInfo{
		Title:        "Registre des incidents de confidentialité / Confidentiality incident register",
		Author:       meta.Organization.Name,
		Creator:      "cloisonctl audit export",
		Producer:     "Cloison",
		CreationDate: meta.Generated,
	})
	if err := pdf.AddTTFFontData(fontRegular, goregular.TTF); err != nil {
		return fmt.Errorf("export: pdf font: %w", err)
	}
	if err := pdf.AddTTFFontData(fontBold, gobold.TTF); err != nil {
		return fmt.Errorf("export: pdf font: %w", err)
	}
	r := &report{pdf: pdf, meta: meta}
	r.newPage()
	r.title()
	if len(files) == 0 {
		r.para(fontRegular, bodySize, "Aucun incident inscrit. / No incident recorded.")
	} else {
		r.summary(files)
	}
	for _, f := range files {
		r.newPage()
		r.incident(f)
	}
	if r.err != nil {
		return fmt.Errorf("export: pdf: %w", r.err)
	}
	_, err := pdf.WriteTo(w)
	return err
}

type report struct {
	pdf  *gopdf.GoPdf
	meta ReportMeta
	page int
	y    float64
	err  error // first error; later calls do nothing
}

func (r *report) setFont(name string, size float64) {
	if r.err == nil {
		r.err = r.pdf.SetFont(name, "", size)
	}
}

func (r *report) newPage() {
	r.pdf.AddPage()
	r.page++
	r.y = margin
	r.setFont(fontRegular, 7)
	r.pdf.SetTextColor(110, 110, 110)
	r.text(margin, footerY, fmt.Sprintf("Registre des incidents de confidentialité / Confidentiality incident register · %s · page %d",
		r.meta.Organization.Name, r.page))
	r.pdf.SetTextColor(0, 0, 0)
}

func (r *report) text(x, y float64, s string) {
	if r.err != nil {
		return
	}
	r.pdf.SetXY(x, y)
	r.err = r.pdf.Cell(nil, s)
}

// lines wraps s to width in the current font, keeping explicit newlines.
func (r *report) lines(s string, width float64) []string {
	if r.err != nil {
		return nil
	}
	var out []string
	for _, para := range strings.Split(s, "\n") {
		if strings.TrimSpace(para) == "" {
			out = append(out, "")
			continue
		}
		ls, err := r.pdf.SplitTextWithWordWrap(para, width)
		if err != nil {
			r.err = err
			return nil
		}
		out = append(out, ls...)
	}
	return out
}

func (r *report) ensure(h float64) {
	if r.y+h > contentBottom {
		r.newPage()
	}
}

func (r *report) para(font string, size float64, s string) {
	r.setFont(font, size)
	for _, l := range r.lines(s, pageW-2*margin) {
		r.ensure(size + 3)
		r.text(margin, r.y, l)
		r.y += size + 3
	}
}

func (r *report) title() {
	r.para(fontBold, 15, "Registre des incidents de confidentialité")
	r.pdf.SetTextColor(90, 90, 90)
	// The English title and the citation each get a line of their own:
	// run together they wrapped inside the citation ("r." | "3.1").
	r.para(fontRegular, 11, "Confidentiality incident register")
	r.para(fontRegular, 9, r.meta.Regime.Citation()+", art. "+audit.CiteRegister.Article)
	r.pdf.SetTextColor(0, 0, 0)
	r.y += 4
	org := r.meta.Organization.Name
	if org == "" {
		org = "non renseignée (aucun réglage du registre) / not set (no register settings recorded)"
	}
	if r.meta.Organization.NEQ != "" {
		org += " · NEQ " + r.meta.Organization.NEQ
	}
	r.para(fontRegular, bodySize, "Organisation / Organization : "+org)
	r.para(fontRegular, bodySize, "Produit le / Generated : "+r.meta.Generated.UTC().Format("2006-01-02 15:04:05 UTC"))
	if r.meta.To > 0 {
		r.para(fontRegular, bodySize, fmt.Sprintf("Journal d'audit / Audit ledger : %s, séquences / seq %d–%d, empreinte / head %s",
			r.meta.Origin, r.meta.From, r.meta.To, r.meta.Head))
	}
	r.y += 8
}

// row draws one labelled element: French label (bold) over the English one
// (grey) on the left, the value wrapped on the right, breaking pages
// inside long values.
func (r *report) row(f field) {
	r.setFont(fontBold, bodySize)
	fr := r.lines(f.fr, labelW)
	r.setFont(fontRegular, bodySize-0.5)
	en := r.lines(f.en, labelW)
	value := f.value
	if strings.TrimSpace(value) == "" {
		value = emptyValueText
	}
	r.setFont(fontRegular, bodySize)
	vals := r.lines(value, pageW-2*margin-labelW-gap)
	labelLines := len(fr) + len(en)
	r.ensure(float64(min(max(labelLines, len(vals)), 6)) * lineH)
	top := r.y
	r.setFont(fontBold, bodySize)
	for i, l := range fr {
		r.text(margin, top+float64(i)*lineH, l)
	}
	r.setFont(fontRegular, bodySize-0.5)
	r.pdf.SetTextColor(100, 100, 100)
	for i, l := range en {
		r.text(margin, top+float64(len(fr)+i)*lineH, l)
	}
	r.pdf.SetTextColor(0, 0, 0)
	r.setFont(fontRegular, bodySize)
	y := top
	for _, l := range vals {
		if y+lineH > contentBottom {
			r.newPage()
			r.setFont(fontRegular, bodySize)
			top, y = r.y, r.y
			labelLines = 0
		}
		r.text(margin+labelW+gap, y, l)
		y += lineH
	}
	r.y = max(y, top+float64(labelLines)*lineH) + 3
	if r.err == nil {
		r.pdf.SetStrokeColor(220, 220, 220)
		r.pdf.Line(margin, r.y-1.5, pageW-margin, r.y-1.5)
	}
}

func (r *report) incident(f audit.IncidentFile) {
	latest := f.Latest()
	r.ensure(60)
	r.para(fontBold, headSize, "Incident "+string(f.ID))
	r.pdf.SetTextColor(90, 90, 90)
	r.para(fontRegular, bodySize, fmt.Sprintf("Ouvert le / Opened %s par / by %s · version courante / current version %d · conserver jusqu'au / retain until %s",
		f.OpenedAt.UTC().Format("2006-01-02 15:04 UTC"), f.OpenedBy, latest.Version, latest.RetainUntil))
	r.pdf.SetTextColor(0, 0, 0)
	r.y += 4
	for _, fl := range registerFields(latest, f.Notices, f.OpenedAt) {
		r.row(fl)
	}
	r.y += 6
	r.ensure(40)
	r.para(fontBold, 10, "Historique des versions / Version history")
	for _, v := range f.Versions {
		r.row(field{fr: fmt.Sprintf("Version %d", v.Version), en: v.RecordedAt.UTC().Format("2006-01-02 15:04 UTC"),
			value: fmt.Sprintf("par / by %s · journal / ledger seq %d · SHA-256 %s", v.RecordedBy, v.LedgerSeq, v.Digest)})
	}
	if len(f.Notices) > 0 {
		r.y += 6
		r.ensure(40)
		r.para(fontBold, 10, "Avis transmis / Notices sent")
		for _, n := range f.Notices {
			who := n.RecipientName
			if n.Tenant != "" {
				who = strings.TrimSpace(who + " (" + string(n.Tenant) + ")")
			}
			value := fmt.Sprintf("%s · moyen / method : %s · journal / ledger seq %d", who, n.Method, n.LedgerSeq)
			if !n.ContentDigest.IsZero() {
				value += " · SHA-256 " + n.ContentDigest.String()
			}
			if n.Text != "" {
				value += "\n" + n.Text
			}
			r.row(field{fr: fmt.Sprintf("Avis %d — %s", n.Number, recipientLabel(n.Recipient)), en: n.SentAt.UTC().Format("2006-01-02 15:04 UTC"),
				value: value})
		}
	}
}

// summaryCols are the summary table's columns: French label, English
// label, width in points (they fill the page between the margins).
var summaryCols = []struct {
	fr, en string
	w      float64
}{
	{"Incident", "Incident", 110}, {"Statut", "Status", 70}, {"Ouvert le", "Opened", 60},
	{"Survenu", "Occurred", 95}, {"Personnes", "Persons", 56}, {"Avis", "Notices", 120},
}

// summaryRows gives one summary row per incident, in summaryCols' order:
// id, status (French / English), opening date, date or period of the
// incident, number of persons ("inconnu / unknown" when unknown) and the
// notices sent, counted by recipient (0 when none).
func summaryRows(files []audit.IncidentFile) [][]string {
	rows := make([][]string, 0, len(files))
	for _, f := range files {
		v := f.Latest()
		counts := map[audit.RecipientKind]int{}
		for _, n := range f.Notices {
			counts[n.Recipient]++
		}
		var ns []string
		for _, k := range audit.RecipientKinds {
			if counts[k] > 0 {
				ns = append(ns, fmt.Sprintf("%s %d", shortRecipient[k], counts[k]))
			}
		}
		notices := "0"
		if len(ns) > 0 {
			notices = strings.Join(ns, " · ")
		}
		rows = append(rows, []string{string(f.ID), label(string(v.Status)), f.OpenedAt.UTC().Format(time.DateOnly),
			period(v.Occurred), count(v.PersonsConcerned, v.PersonsApproximate, v.PersonsUnknown), notices})
	}
	return rows
}

// shortRecipient names each recipient kind in the summary table.
var shortRecipient = map[audit.RecipientKind]string{
	audit.RecipientCAI: "CAI", audit.RecipientPersons: "personnes/persons", audit.RecipientPublic: "public",
	audit.RecipientForeignAuthority: "hors QC/foreign", audit.RecipientTenant: "clients",
}

// summary draws the table of every incident, breaking pages between rows
// (the header repeated on each page).
func (r *report) summary(files []audit.IncidentFile) {
	r.ensure(60)
	r.para(fontBold, headSize, "Sommaire des incidents")
	r.pdf.SetTextColor(90, 90, 90)
	r.para(fontRegular, bodySize, fmt.Sprintf("Summary of incidents · %d", len(files)))
	r.pdf.SetTextColor(0, 0, 0)
	r.y += 4
	header := func() {
		x := margin
		for _, c := range summaryCols {
			r.setFont(fontBold, bodySize)
			r.text(x, r.y, c.fr)
			r.setFont(fontRegular, bodySize-0.5)
			r.pdf.SetTextColor(100, 100, 100)
			r.text(x, r.y+lineH, c.en)
			r.pdf.SetTextColor(0, 0, 0)
			x += c.w
		}
		r.y += 2*lineH + 2
		if r.err == nil {
			r.pdf.SetStrokeColor(120, 120, 120)
			r.pdf.Line(margin, r.y-2, pageW-margin, r.y-2)
		}
	}
	header()
	for _, row := range summaryRows(files) {
		r.setFont(fontRegular, bodySize)
		cells := make([][]string, len(row))
		n := 1
		for i, v := range row {
			cells[i] = r.lines(v, summaryCols[i].w-4)
			n = max(n, len(cells[i]))
		}
		if r.y+float64(n)*lineH > contentBottom {
			r.newPage()
			header()
			r.setFont(fontRegular, bodySize)
		}
		x := margin
		for i, ls := range cells {
			for j, l := range ls {
				r.text(x, r.y+float64(j)*lineH, l)
			}
			x += summaryCols[i].w
		}
		r.y += float64(n)*lineH + 3
		if r.err == nil {
			r.pdf.SetStrokeColor(220, 220, 220)
			r.pdf.Line(margin, r.y-1.5, pageW-margin, r.y-1.5)
		}
	}
}
