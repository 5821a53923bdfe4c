package audit

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/cloison/cloison"
)

func dueFile(named map[int][]cloison.TenantID, notices []StoredNotice, t0 time.Time) IncidentFile {
	f := IncidentFile{ID: "inc-1", Notices: notices}
	for v := 1; v <= len(named); v++ {
		sv := StoredVersion{RecordedAt: t0.Add(time.Duration(v-1) * time.Hour)}
		sv.AffectedTenants = named[v]
		f.Versions = append(f.Versions, sv)
	}
	return f
}

func toTenant(t cloison.TenantID, sent time.Time) StoredNotice {
	return StoredNotice{Notice: Notice{Incident: "inc-1", Recipient: RecipientTenant, Tenant: t, SentAt: sent, Method: "e-mail"}}
}

// TestNoticeDues: the clock starts at the version that first names a
// tenant; the first notice to that tenant decides on time or late;
// notices to other recipients or tenants do not count; no deadline is
// listed, not dropped.
func TestNoticeDues(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	hours := map[cloison.TenantID]int{"a": 24, "b": 24, "c": 0}
	dl := func(t cloison.TenantID) int { return hours[t] }
	for _, c := range []struct {
		name    string
		named   map[int][]cloison.TenantID
		notices []StoredNotice
		now     time.Time
		want    map[cloison.TenantID]NoticeStatus
		wantDue map[cloison.TenantID]time.Time
	}{
		{"pending", map[int][]cloison.TenantID{1: {"a"}}, nil, t0.Add(23 * time.Hour),
			map[cloison.TenantID]NoticeStatus{"a": NoticePending}, map[cloison.TenantID]time.Time{"a": t0.Add(24 * time.Hour)}},
		{"overdue", map[int][]cloison.TenantID{1: {"a"}}, nil, t0.Add(24*time.Hour + time.Second),
			map[cloison.TenantID]NoticeStatus{"a": NoticeOverdue}, nil},
		{"due exactly now is not yet overdue", map[int][]cloison.TenantID{1: {"a"}}, nil, t0.Add(24 * time.Hour),
			map[cloison.TenantID]NoticeStatus{"a": NoticePending}, nil},
		{"sent at the due time is on time", map[int][]cloison.TenantID{1: {"a"}}, []StoredNotice{toTenant("a", t0.Add(24*time.Hour))}, t0.Add(48 * time.Hour),
			map[cloison.TenantID]NoticeStatus{"a": NoticeOnTime}, nil},
		{"sent late", map[int][]cloison.TenantID{1: {"a"}}, []StoredNotice{toTenant("a", t0.Add(25*time.Hour))}, t0.Add(48 * time.Hour),
			map[cloison.TenantID]NoticeStatus{"a": NoticeLate}, nil},
		{"earliest notice decides", map[int][]cloison.TenantID{1: {"a"}}, []StoredNotice{toTenant("a", t0.Add(30*time.Hour)), toTenant("a", t0.Add(time.Hour))}, t0.Add(48 * time.Hour),
			map[cloison.TenantID]NoticeStatus{"a": NoticeOnTime}, nil},
		{"named in version 3: clock from then", map[int][]cloison.TenantID{1: {"a"}, 2: {"a"}, 3: {"a", "b"}}, nil, t0.Add(25 * time.Hour),
			map[cloison.TenantID]NoticeStatus{"a": NoticeOverdue, "b": NoticePending}, map[cloison.TenantID]time.Time{"b": t0.Add(26 * time.Hour)}},
		{"named then dropped still owed", map[int][]cloison.TenantID{1: {"a", "b"}, 2: {"a"}}, nil, t0.Add(48 * time.Hour),
			map[cloison.TenantID]NoticeStatus{"a": NoticeOverdue, "b": NoticeOverdue}, nil},
		{"notice to another tenant or the CAI does not count", map[int][]cloison.TenantID{1: {"a", "b"}},
			[]StoredNotice{toTenant("b", t0), {Notice: Notice{Recipient: RecipientCAI, SentAt: t0, Method: "form"}}}, t0.Add(48 * time.Hour),
			map[cloison.TenantID]NoticeStatus{"a": NoticeOverdue, "b": NoticeOnTime}, nil},
		{"no deadline in the contract", map[int][]cloison.TenantID{1: {"c"}}, nil, t0.Add(1000 * time.Hour),
			map[cloison.TenantID]NoticeStatus{"c": NoticeNoDeadline}, nil},
		{"notice to a tenant never named is ignored", map[int][]cloison.TenantID{1: {"a"}}, []StoredNotice{toTenant("z", t0)}, t0,
			map[cloison.TenantID]NoticeStatus{"a": NoticePending}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := dueFile(c.named, c.notices, t0).NoticeDues(dl, c.now)
			if len(got) != len(c.want) {
				t.Fatalf("got %+v, want %d lines", got, len(c.want))
			}
			for _, d := range got {
				if d.Status != c.want[d.Tenant] {
					t.Errorf("%s: %s, want %s", d.Tenant, d.Status, c.want[d.Tenant])
				}
				if w, ok := c.wantDue[d.Tenant]; ok && (d.DueAt == nil || !d.DueAt.Equal(w)) {
					t.Errorf("%s: due %v, want %v", d.Tenant, d.DueAt, w)
				}
				if (d.DueAt == nil) != (d.Status == NoticeNoDeadline) {
					t.Errorf("%s: due %v with status %s", d.Tenant, d.DueAt, d.Status)
				}
			}
		})
	}
	if d := DueFor(dueFile(map[int][]cloison.TenantID{1: {"a"}}, nil, t0), "a", 24); d == nil || !d.Equal(t0.Add(24*time.Hour)) {
		t.Errorf("DueFor a: %v", d)
	}
	if d := DueFor(dueFile(map[int][]cloison.TenantID{1: {"a"}}, nil, t0), "b", 24); d != nil {
		t.Errorf("DueFor an unnamed tenant: %v, want nil", d)
	}
	if got := ForTenantDues(dueFile(map[int][]cloison.TenantID{1: {"a", "b"}}, nil, t0).NoticeDues(dl, t0), "b"); len(got) != 1 || got[0].Tenant != "b" {
		t.Errorf("ForTenantDues b: %+v", got)
	}
}

// TestNoticeDuesProperty: one line per tenant named; overdue exactly when
// nothing was sent and now is past named + deadline; a notice sent can
// only move a line out of overdue/pending, never into it.
func TestNoticeDuesProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		ids := []cloison.TenantID{"a", "b", "c", "d"}
		named := map[int][]cloison.TenantID{}
		nv := rapid.IntRange(1, 5).Draw(rt, "versions")
		seen := map[cloison.TenantID]bool{}
		for v := 1; v <= nv; v++ {
			named[v] = []cloison.TenantID{}
			for _, id := range ids {
				if rapid.Bool().Draw(rt, "names") {
					named[v] = append(named[v], id)
					seen[id] = true
				}
			}
		}
		var notices []StoredNotice
		for i := rapid.IntRange(0, 6).Draw(rt, "notices"); i > 0; i-- {
			notices = append(notices, toTenant(rapid.SampledFrom(ids).Draw(rt, "to"), t0.Add(time.Duration(rapid.IntRange(0, 100).Draw(rt, "sent"))*time.Hour)))
		}
		hours := rapid.IntRange(0, 48).Draw(rt, "hours")
		now := t0.Add(time.Duration(rapid.IntRange(0, 200).Draw(rt, "now")) * time.Hour)
		dl := func(cloison.TenantID) int { return hours }
		f := dueFile(named, notices, t0)
		got := f.NoticeDues(dl, now)
		if len(got) != len(seen) {
			rt.Fatalf("%d lines for %d tenants named", len(got), len(seen))
		}
		for _, d := range got {
			if !seen[d.Tenant] {
				rt.Fatalf("line for unnamed %s", d.Tenant)
			}
			wantOverdue := hours > 0 && d.SentAt == nil && now.After(d.NamedAt.Add(time.Duration(hours)*time.Hour))
			if (d.Status == NoticeOverdue) != wantOverdue {
				rt.Fatalf("%+v: overdue should be %v", d, wantOverdue)
			}
		}
		without := dueFile(named, nil, t0).NoticeDues(dl, now)
		for i, d := range got {
			if d.SentAt != nil && (d.Status == NoticeOverdue || d.Status == NoticePending) {
				rt.Fatalf("%+v: sent yet %s", d, d.Status)
			}
			if without[i].Status == NoticeOnTime || without[i].Status == NoticeLate {
				rt.Fatalf("%+v: nothing sent yet %s", without[i], without[i].Status)
			}
		}
	})
}

// The art. 18.3 clock runs from awareness, not from the register's
// recording: a client notice 25 days after awareness is late though it
// was sent two days after the entry was recorded; a recording earlier
// than the awareness day's start (impossible once validated) never moves
// the clock later.
func TestNoticeDueCountsFromAwareness(t *testing.T) {
	aware := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	recorded := aware.AddDate(0, 0, 23)
	f := IncidentFile{ID: "inc-1", Versions: []StoredVersion{{IncidentVersion: IncidentVersion{AffectedTenants: []cloison.TenantID{"a"},
		Awareness: Period{Start: "2026-11-01"}}, RecordedAt: recorded}},
		Notices: []StoredNotice{toTenant("a", aware.AddDate(0, 0, 25))}}
	dues := f.NoticeDues(func(cloison.TenantID) int { return 72 }, aware.AddDate(0, 0, 30))
	if len(dues) != 1 || dues[0].Status != NoticeLate {
		t.Fatalf("got %+v, want one sent_late", dues)
	}
	if want := aware.Add(72 * time.Hour); !dues[0].DueAt.Equal(want) || !dues[0].ClockFrom.Equal(aware) {
		t.Errorf("got due %v from %v, want %v from %v", dues[0].DueAt, dues[0].ClockFrom, want, aware)
	}
	if due := DueFor(f, "a", 72); due == nil || !due.Equal(aware.Add(72*time.Hour)) {
		t.Errorf("DueFor: got %v", due)
	}
	// Without a notice, it is overdue three days after awareness even if
	// the entry was recorded a day ago.
	f.Notices = nil
	if dues := f.NoticeDues(func(cloison.TenantID) int { return 72 }, recorded.Add(24*time.Hour)); dues[0].Status != NoticeOverdue {
		t.Errorf("got %s, want overdue", dues[0].Status)
	}
	// Opened on the awareness day (an automatic entry opens at
	// detection): the opening bounds the hour.
	opened := aware.Add(15 * time.Hour)
	f.Versions[0].RecordedAt = opened
	if d := f.NoticeDues(func(cloison.TenantID) int { return 24 }, opened)[0]; !d.ClockFrom.Equal(opened) || !d.DueAt.Equal(opened.Add(24*time.Hour)) {
		t.Errorf("same-day opening: got due %v from %v, want from %v", d.DueAt, d.ClockFrom, opened)
	}
}
