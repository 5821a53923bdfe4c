package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/export"
	"github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/tenancy"
)

func newIncidentCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "incident",
		Short: "The Loi 25 confidentiality-incident register",
		Long: `Each incident is kept up to date by appending versions (never by editing one); each
version and each notice is chained into the audit ledger. Versions are JSON documents with the
fields of audit.IncidentVersion (every element of s. 7 of the Règlement sur les incidents de
confidentialité and what a notice to the Commission adds, s. 3).`,
	}
	cmd.PersistentFlags().String("actor", envOr("CLOISON_ACTOR", "admin:"+os.Getenv("USER")), "who acts, recorded in the ledger (identifier)")
	cmd.AddCommand(newIncidentListCmd(g), newIncidentShowCmd(g), newIncidentOpenCmd(g), newIncidentUpdateCmd(g),
		newIncidentNoticeCmd(g), newIncidentDraftCmd(g), newIncidentPurgeCmd(g))
	return cmd
}

func actorOf(cmd *cobra.Command) (audit.Name, error) {
	a, _ := cmd.Flags().GetString("actor")
	if err := audit.CheckName("actor", a); err != nil {
		return "", err
	}
	return audit.Name(a), nil
}

func newIncidentListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List incidents with their current status, then hold the register to the ledger (a missing entry fails, exit 3)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, done, err := g.store(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer done()
			files, err := s.Incidents(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "INCIDENT\tSOURCE\tSTATUS\tASSESSMENT\tVERSION\tNOTICES\tAWARENESS\tRETAIN UNTIL")
			for _, f := range files {
				v := f.Latest()
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", f.ID, f.Source, v.Status, v.Assessment.Status, v.Version,
					len(f.Notices), v.Awareness.Start, v.RetainUntil)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			// A row deleted behind the triggers would only shorten the
			// list: the register is held to the ledger, and every
			// disagreement fails the command (exit 3).
			problems, err := s.CheckRegister(cmd.Context())
			if err != nil {
				return err
			}
			return errors.Join(problems...)
		},
	}
}

func newIncidentShowCmd(g *globals) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Print an incident's current version (or every version) as JSON, with its notices",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, done, err := g.store(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer done()
			f, err := s.Incident(cmd.Context(), audit.Name(args[0]))
			if err != nil {
				return err
			}
			type notice struct {
				Number    int64               `json:"number"`
				Recipient audit.RecipientKind `json:"recipient"`
				Name      string              `json:"recipient_name"`
				Tenant    cloison.TenantID    `json:"tenant,omitempty"`
				SentAt    time.Time           `json:"sent_at"`
				Method    string              `json:"method"`
				Digest    audit.Digest        `json:"content_sha256"`
				LedgerSeq uint64              `json:"ledger_seq"`
			}
			out := struct {
				ID       audit.Name              `json:"id"`
				OpenedAt time.Time               `json:"opened_at"`
				OpenedBy audit.Name              `json:"opened_by"`
				Versions []audit.IncidentVersion `json:"versions"`
				Notices  []notice                `json:"notices"`
			}{ID: f.ID, OpenedAt: f.OpenedAt, OpenedBy: f.OpenedBy, Notices: []notice{}}
			vs := f.Versions
			if !all {
				vs = vs[len(vs)-1:]
			}
			for _, v := range vs {
				out.Versions = append(out.Versions, v.IncidentVersion)
			}
			for _, n := range f.Notices {
				out.Notices = append(out.Notices, notice{n.Number, n.Recipient, n.RecipientName, n.Tenant, n.SentAt, n.Method, n.ContentDigest, n.LedgerSeq})
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			enc.SetEscapeHTML(false)
			return enc.Encode(out)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "every version, oldest first")
	return cmd
}

// decodeVersionFile reads a JSON document onto v (fields absent from the
// file keep v's values), refusing unknown fields.
func decodeVersionFile(path string, v *audit.IncidentVersion) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return cloison.Errorf(cloison.CodeInvalid, "%s: %v", path, err)
	}
	return nil
}

// versionFlags are the common elements settable from the command line.
type versionFlags struct {
	file, circumstances, personalInfo, awareness, occurred, cause string
	persons                                                       int64
	assessmentDone                                                bool
	risk, sensitivity, maliciousUses, consequences, likelihood    string
	measureTaken, measurePlanned                                  []string
	close                                                         bool
}

func (vf *versionFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&vf.file, "file", "", "JSON document with fields of audit.IncidentVersion (applied first)")
	f.StringVar(&vf.circumstances, "circumstances", "", "brief description of the circumstances ("+audit.CiteRegisterCircumstances.EN()+")")
	f.StringVar(&vf.personalInfo, "personal-info", "", "description of the personal information concerned ("+audit.CiteRegisterInfo.EN()+")")
	f.StringVar(&vf.occurred, "occurred", "", "date or period of the incident: YYYY-MM-DD[..YYYY-MM-DD], ~ at the end if approximate ("+audit.CiteRegisterOccurred.EN()+")")
	f.StringVar(&vf.awareness, "awareness", "", "date or period of awareness: YYYY-MM-DD[..YYYY-MM-DD], ~ at the end if approximate ("+audit.CiteRegisterAwareness.EN()+")")
	f.Int64Var(&vf.persons, "persons", -1, "number of persons concerned ("+audit.CiteRegisterPersons.EN()+")")
	f.StringVar(&vf.cause, "cause", "", "cause, if known ("+audit.CiteCAICircumstances.EN()+")")
	f.BoolVar(&vf.assessmentDone, "assessment-complete", false, "mark the serious-injury assessment completed today ("+audit.CiteRegisterAssessment.EN()+")")
	f.StringVar(&vf.risk, "risk", "", "risk of serious injury: yes or no")
	f.StringVar(&vf.sensitivity, "sensitivity", "", "sensitivity of the information ("+audit.CiteRegisterAssessment.EN()+")")
	f.StringVar(&vf.maliciousUses, "malicious-uses", "", "possible malicious uses ("+audit.CiteRegisterAssessment.EN()+")")
	f.StringVar(&vf.consequences, "consequences", "", "anticipated consequences ("+audit.CiteRegisterAssessment.EN()+")")
	f.StringVar(&vf.likelihood, "likelihood", "", "likelihood of injurious use ("+audit.CiteRegisterAssessment.EN()+")")
	f.StringArrayVar(&vf.measureTaken, "measure-taken", nil, "measure taken to reduce the risk, 'YYYY-MM-DD: text' (repeatable, "+audit.CiteRegisterMeasures.EN()+")")
	f.StringArrayVar(&vf.measurePlanned, "measure-planned", nil, "measure planned, 'YYYY-MM-DD: text' (repeatable, "+audit.CiteCAIMeasures.EN()+")")
	f.BoolVar(&vf.close, "close", false, "close the incident file")
}

func parsePeriod(s string) (audit.Period, error) {
	start, end, _ := strings.Cut(s, "..")
	p := audit.Period{Start: audit.Day(start), End: audit.Day(end)}
	if strings.HasSuffix(s, "~") {
		p.Approximate = true
		p.Start, p.End = audit.Day(strings.TrimSuffix(string(p.Start), "~")), audit.Day(strings.TrimSuffix(string(p.End), "~"))
	}
	return p, nil
}

func parseMeasure(s string) audit.Measure {
	if d, what, ok := strings.Cut(s, ": "); ok && len(d) == 10 {
		return audit.Measure{Date: audit.Day(d), What: what}
	}
	return audit.Measure{What: s}
}

func (vf *versionFlags) apply(v *audit.IncidentVersion) error {
	if vf.file != "" {
		if err := decodeVersionFile(vf.file, v); err != nil {
			return err
		}
	}
	set := func(dst *string, s string) {
		if s != "" {
			*dst = s
		}
	}
	set(&v.Circumstances, vf.circumstances)
	set(&v.PersonalInfo, vf.personalInfo)
	set(&v.Cause, vf.cause)
	set(&v.Assessment.Sensitivity, vf.sensitivity)
	set(&v.Assessment.MaliciousUses, vf.maliciousUses)
	set(&v.Assessment.Consequences, vf.consequences)
	set(&v.Assessment.Likelihood, vf.likelihood)
	for _, p := range []struct {
		s   string
		dst *audit.Period
	}{{vf.occurred, &v.Occurred}, {vf.awareness, &v.Awareness}} {
		if p.s != "" {
			per, err := parsePeriod(p.s)
			if err != nil {
				return err
			}
			*p.dst = per
		}
	}
	if vf.persons >= 0 {
		v.PersonsConcerned = vf.persons
	}
	switch vf.risk {
	case "":
	case "yes", "oui":
		t := true
		v.Assessment.RiskOfSeriousInjury = &t
	case "no", "non":
		f := false
		v.Assessment.RiskOfSeriousInjury = &f
	default:
		return cloison.Errorf(cloison.CodeInvalid, "--risk must be yes or no")
	}
	if vf.assessmentDone {
		v.Assessment.Status = audit.AssessmentCompleted
		v.Assessment.CompletedOn = audit.DayOf(time.Now())
	}
	for _, m := range vf.measureTaken {
		v.MeasuresTaken = append(v.MeasuresTaken, parseMeasure(m))
	}
	for _, m := range vf.measurePlanned {
		v.MeasuresPlanned = append(v.MeasuresPlanned, parseMeasure(m))
	}
	if vf.close {
		v.Status = audit.IncidentClosed
	}
	return nil
}

func newIncidentOpenCmd(g *globals) *cobra.Command {
	var vf versionFlags
	cmd := &cobra.Command{
		Use:   "open",
		Short: "Open an incident (version 1); the assessment starts pending",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			actor, err := actorOf(cmd)
			if err != nil {
				return err
			}
			now := time.Now()
			v := audit.IncidentVersion{
				Incident: postgres.NewIncidentID(now), Version: 1, Status: audit.IncidentOpen, Source: audit.SourceAdmin,
				Awareness: audit.Period{Start: audit.DayOf(now)}, Assessment: audit.Assessment{Status: audit.AssessmentPending},
				Organization: audit.Organization{Name: g.orgName, NEQ: g.orgNEQ},
			}
			if err := vf.apply(&v); err != nil {
				return err
			}
			v.Version, v.Source = 1, audit.SourceAdmin
			if v.Occurred.Start == "" {
				v.Occurred = audit.Period{Start: v.Awareness.Start, Approximate: true}
			}
			s, done, err := g.store(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer done()
			sv, err := s.OpenIncident(cmd.Context(), actor, v)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s opened (ledger seq %d, kept until %s)\n", v.Incident, sv.LedgerSeq, sv.RetainUntil)
			return nil
		},
	}
	vf.register(cmd)
	return cmd
}

func newIncidentUpdateCmd(g *globals) *cobra.Command {
	var vf versionFlags
	cmd := &cobra.Command{
		Use:   "update ID",
		Short: "Append a new version: the current one with the given changes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			actor, err := actorOf(cmd)
			if err != nil {
				return err
			}
			s, done, err := g.store(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer done()
			sv, err := s.UpdateIncident(cmd.Context(), actor, audit.Name(args[0]), vf.apply)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s version %d recorded (ledger seq %d)\n", args[0], sv.Version, sv.LedgerSeq)
			return nil
		},
	}
	vf.register(cmd)
	return cmd
}

func newIncidentNoticeCmd(g *globals) *cobra.Command {
	var to, name, tenant, method, sentAt, contentFile string
	cmd := &cobra.Command{
		Use:   "notice ID",
		Short: "Record a notice sent about an incident (CAI, persons, public, foreign authority, tenant)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			actor, err := actorOf(cmd)
			if err != nil {
				return err
			}
			n := audit.Notice{Incident: audit.Name(args[0]), Recipient: audit.RecipientKind(to), RecipientName: name,
				Tenant: cloison.TenantID(tenant), Method: method, SentAt: time.Now()}
			if sentAt != "" {
				if n.SentAt, err = time.Parse(time.RFC3339, sentAt); err != nil {
					return cloison.Errorf(cloison.CodeInvalid, "--sent-at: %v", err)
				}
			}
			if contentFile != "" {
				b, err := os.ReadFile(contentFile)
				if err != nil {
					return err
				}
				n.ContentDigest = audit.Sum(b)
				if utf8.Valid(b) && len(b) <= audit.MaxNoticeTextLen {
					n.Text = string(b) // kept in the register row; the ledger holds its digest
				}
			}
			s, done, err := g.store(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer done()
			sn, err := s.AddNotice(cmd.Context(), actor, n)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s notice %d recorded (ledger seq %d)\n", args[0], sn.Number, sn.LedgerSeq)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&to, "to", "", "recipient kind: cai, persons, public, foreign_authority, tenant (required)")
	f.StringVar(&name, "recipient", "", "recipient's name")
	f.StringVar(&tenant, "tenant", "", "tenant id (for --to tenant)")
	f.StringVar(&method, "method", "", "how it was sent: e-mail, letter, portal... (required)")
	f.StringVar(&sentAt, "sent-at", "", "when, RFC 3339 (default now)")
	f.StringVar(&contentFile, "content-file", "", "the notice as sent; its SHA-256 is recorded")
	_ = cmd.MarkFlagRequired("to")
	_ = cmd.MarkFlagRequired("method")
	return cmd
}

func newIncidentPurgeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "purge ID",
		Short: "Remove an incident whose five-year retention has ended (connect as the owner role; ledgered)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			actor, err := actorOf(cmd)
			if err != nil {
				return err
			}
			s, done, err := g.store(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer done()
			rec, err := s.PurgeIncident(cmd.Context(), actor, audit.Name(args[0]))
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s purged (ledger seq %d)\n", args[0], rec.Seq)
			return nil
		},
	}
}

func newIncidentDraftCmd(g *globals) *cobra.Command {
	var tenant string
	cmd := &cobra.Command{
		Use:   "draft ID cai|persons|client",
		Short: "Print a French-first draft of a notice: to the Commission (s. 3), to the persons concerned (s. 4), or to a client tenant (art. 18.3, --tenant)",
		Long: `Prints a draft (French, then English) from the incident's current version, for a person to
review, complete and send; nothing is recorded (record the notice sent with "incident notice").
A client draft is addressed to the tenant's incident contact and names no other tenant.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind := export.DraftKind(args[1])
			if !slices.Contains(export.DraftKinds, kind) {
				return fmt.Errorf("%w %q (want cai, persons or client)", export.ErrDraftKind, args[1])
			}
			if (kind == export.DraftClient) != (tenant != "") {
				return cloison.NewError(cloison.CodeInvalid, "--tenant is required for a client draft, and only for it")
			}
			s, done, err := g.store(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer done()
			f, err := s.Incident(cmd.Context(), audit.Name(args[0]))
			if err != nil {
				return err
			}
			var to export.DraftClientOf
			if kind == export.DraftClient {
				t, err := tenancy.NewStore(s.Pool()).Tenant(cmd.Context(), cloison.TenantID(tenant))
				if err != nil {
					return fmt.Errorf("tenant %s: %w", tenant, err)
				}
				to = export.DraftClientOf{Tenant: t.ID, Contact: t.IncidentContact, Due: audit.DueFor(f, t.ID, t.NoticeDeadlineHours)}
			}
			text, err := export.Draft(kind, f, audit.Organization{}, to)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), text)
			return err
		},
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "the client tenant (client drafts)")
	return cmd
}
