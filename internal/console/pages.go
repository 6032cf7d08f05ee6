package console

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/atmost/atmost/internal/adapters"
	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// The pages that read: the overview, the intents, one intent, the rejects, the controls.

// reasonCount is one reason's count in a state.
type reasonCount struct {
	Reason ledger.Reason
	N      int64
}

// stateCounts is one state's count, with its reasons, largest first.
type stateCounts struct {
	State   ledger.State
	Total   int64
	Reasons []reasonCount
}

// waitingOrder is the order the overview shows the states in: what waits for a person first.
var waitingOrder = []ledger.State{ledger.Parked, ledger.Indeterminate, ledger.Failed, ledger.Pending, ledger.Authorized, ledger.Published}

func ordered(m map[ledger.State]map[ledger.Reason]int64) []stateCounts {
	var out []stateCounts
	for _, st := range waitingOrder {
		reasons, ok := m[st]
		if !ok {
			continue
		}
		sc := stateCounts{State: st}
		for r, n := range reasons {
			sc.Total += n
			sc.Reasons = append(sc.Reasons, reasonCount{r, n})
		}
		sort.Slice(sc.Reasons, func(i, j int) bool {
			a, b := sc.Reasons[i], sc.Reasons[j]
			return a.N > b.N || a.N == b.N && a.Reason < b.Reason
		})
		out = append(out, sc)
	}
	return out
}

// unservable is an account the dispatchers cannot serve now, and why.
type unservable struct {
	Account string
	Why     string
}

type overviewData struct {
	Waiting      []stateCounts
	Changed      []stateCounts
	OutboxRows   int64
	OutboxOldest time.Duration
	Engaged      []ledger.Switch
	Unservable   []unservable
	// AllHeld says what holds every account when the global kill switch does, in one line
	// instead of the same line for each account; Unservable then lists only the others.
	AllHeld string
	Recent  []ledger.Intent
	Epoch   ledger.EpochStart
	At      time.Time
}

func (s *Server) overviewData(r *http.Request) (overviewData, error) {
	ctx := r.Context()
	d := overviewData{At: time.Now()}
	waiting, err := s.l.Waiting(ctx)
	if err != nil {
		return d, err
	}
	d.Waiting = ordered(waiting)
	changed, err := s.l.Changed(ctx, d.At.Add(-time.Hour))
	if err != nil {
		return d, err
	}
	d.Changed = ordered(changed)
	if d.OutboxRows, d.OutboxOldest, err = s.l.OutboxLag(ctx); err != nil {
		return d, err
	}
	switches, err := s.l.Switches(ctx)
	if err != nil {
		return d, err
	}
	for _, sw := range switches {
		if sw.Engaged {
			d.Engaged = append(d.Engaged, sw)
		}
	}
	// What holds each account is the ledger's answer, the gate Authorize would refuse it at.
	holds, err := s.l.Holds(ctx, nil)
	if err != nil {
		return d, err
	}
	for _, id := range slices.Sorted(maps.Keys(holds)) {
		h := holds[id]
		if h.Reason == ledger.ReasonKillSwitch && h.Scope == ledger.GlobalScope {
			d.AllHeld = holdText(h)
			continue
		}
		d.Unservable = append(d.Unservable, unservable{id, holdText(h)})
	}
	recent, err := s.l.Browse(ctx, ledger.BrowseFilter{}, ledger.BrowseCursor{}, 10)
	if err != nil {
		return d, err
	}
	d.Recent = recent.Intents
	if d.Epoch, err = s.l.CurrentEpoch(ctx); err != nil {
		return d, err
	}
	return d, nil
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request, v visitor) {
	d, err := s.overviewData(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, http.StatusOK, "overview", v, d)
}

// overviewLive is the overview's body alone, for the page's script to refresh it.
func (s *Server) overviewLive(w http.ResponseWriter, r *http.Request, v visitor) {
	d, err := s.overviewData(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, http.StatusOK, "overview_fragment", v, d)
}

// listFilter is the intents page's filter as its form and links carry it.
type listFilter struct {
	State, Reason, Account, Since, Until, Text string
	Per                                        int
	f                                          ledger.BrowseFilter
}

// timeLayouts are the times the filter takes: a browser's datetime-local (read as UTC) and
// RFC 3339.
var timeLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339Nano, "2006-01-02 15:04", "2006-01-02"}

func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range timeLayouts {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("give a time as 2026-03-01T10:00 (UTC) or RFC 3339")
}

func parseFilter(q url.Values) (listFilter, []string) {
	lf := listFilter{State: strings.TrimSpace(q.Get("state")), Reason: strings.TrimSpace(q.Get("reason")), Account: strings.TrimSpace(q.Get("account")),
		Since: strings.TrimSpace(q.Get("since")), Until: strings.TrimSpace(q.Get("until")), Text: strings.TrimSpace(q.Get("q")), Per: 50}
	var problems []string
	if lf.State != "" && !ledger.State(lf.State).Valid() {
		problems = append(problems, "state "+strconv.Quote(lf.State)+" is not one of the six states")
		lf.State = ""
	}
	if lf.Reason != "" {
		if _, ok := ledger.Reason(lf.Reason).Rule(); !ok {
			problems = append(problems, "reason "+strconv.Quote(lf.Reason)+" is not a reason the ledger writes")
			lf.Reason = ""
		}
	}
	lf.f = ledger.BrowseFilter{State: ledger.State(lf.State), Reason: ledger.Reason(lf.Reason), Account: lf.Account, Text: lf.Text}
	for _, t := range []struct {
		name, v string
		out     *time.Time
	}{{"since", lf.Since, &lf.f.Since}, {"until", lf.Until, &lf.f.Until}} {
		if t.v == "" {
			continue
		}
		at, err := parseTime(t.v)
		if err != nil {
			problems = append(problems, t.name+": "+err.Error())
			continue
		}
		*t.out = at
	}
	if n, err := strconv.Atoi(q.Get("per")); err == nil && n >= 1 && n <= 500 {
		lf.Per = n
	}
	return lf, problems
}

// Query is the filter as URL parameters, for links.
func (lf listFilter) Query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"state": lf.State, "reason": lf.Reason, "account": lf.Account, "since": lf.Since, "until": lf.Until, "q": lf.Text} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if lf.Per != 50 {
		q.Set("per", strconv.Itoa(lf.Per))
	}
	return q
}

type intentsData struct {
	Filter   listFilter
	Problems []string
	Page     ledger.BrowsePage
	Next     string // the next page's URL, "" at the end
	First    bool
	States   []ledger.State
	Reasons  []ledger.Reason
	Accounts []string
	Window   int
	Took     time.Duration
	BulkURL  string
}

func sortedReasons() []ledger.Reason {
	var out []ledger.Reason
	for _, st := range waitingOrder {
		var rs []ledger.Reason
		for r, rule := range atmosttype.Reasons() {
			if rule.State == st {
				rs = append(rs, r)
			}
		}
		sort.Slice(rs, func(i, j int) bool { return rs[i] < rs[j] })
		out = append(out, rs...)
	}
	return out
}

func (s *Server) accountIDs(r *http.Request) ([]string, error) {
	accounts, err := s.l.Accounts(r.Context())
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(accounts))
	for i, a := range accounts {
		ids[i] = a.ID
	}
	sort.Strings(ids)
	return ids, nil
}

func (s *Server) intents(w http.ResponseWriter, r *http.Request, v visitor) {
	q := r.URL.Query()
	if k, ok := parseKey(q.Get("q")); ok {
		http.Redirect(w, r, "/intents/"+k.String(), http.StatusSeeOther)
		return
	}
	lf, problems := parseFilter(q)
	var after ledger.BrowseCursor
	if at, key := q.Get("after_at"), q.Get("after_key"); at != "" || key != "" {
		t, errT := time.Parse(time.RFC3339Nano, at)
		k, okK := parseKey(key)
		if errT != nil || !okK {
			problems = append(problems, "the page cursor is not one this console wrote; starting at the newest")
		} else {
			after = ledger.BrowseCursor{At: t, Key: k}
		}
	}
	start := time.Now()
	pg, err := s.l.Browse(r.Context(), lf.f, after, lf.Per)
	if err != nil {
		s.fail(w, err)
		return
	}
	d := intentsData{Filter: lf, Problems: problems, Page: pg, First: after.IsZero(), States: atmosttype.States(), Reasons: sortedReasons(),
		Window: ledger.BrowseWindow, Took: time.Since(start)}
	if d.Accounts, err = s.accountIDs(r); err != nil {
		s.fail(w, err)
		return
	}
	if pg.Next != nil {
		nq := lf.Query()
		nq.Set("after_at", pg.Next.At.UTC().Format(time.RFC3339Nano))
		nq.Set("after_key", pg.Next.Key.String())
		d.Next = "/intents?" + nq.Encode()
	}
	d.BulkURL = "/bulk?" + lf.Query().Encode()
	s.render(w, http.StatusOK, "intents", v, d)
}

// eventRow is one transition of an intent as an event on ATMOST_EVENTS.
type eventRow struct {
	ID      events.ID     `json:"id"`
	Subject string        `json:"subject"`
	Seq     int64         `json:"seq"`
	To      ledger.State  `json:"to"`
	Reason  ledger.Reason `json:"reason"`
	// Where: "outbox" (not published yet), "stream" (seen on ATMOST_EVENTS, at StreamSeq),
	// "published" (left the outbox, not looked for on the stream).
	Where     string `json:"where"`
	StreamSeq uint64 `json:"stream_seq,omitempty"`
}

// allowed is one operator verb on an intent: whether it may be used now, and why not.
type allowed struct {
	Verb   string `json:"verb"`
	OK     bool   `json:"allowed"`
	WhyNot string `json:"why_not,omitempty"`
}

type intentData struct {
	Rec  ledger.Record
	Text string
	// Hold is the duplicate-text hold that parked it, as atmost intents show prints it.
	Hold *ledger.TextHold
	// Waiting says why a pending intent waits because its account cannot be served, as atmost
	// intents show says it (adapters.IntentWait); nil when it does not.
	Waiting     *waiting
	Meaning     string
	Events      []eventRow
	EventsNote  string
	Verbs       []allowed
	AttemptRows []attemptRow
	// Runbook is the runbook of its reason, for a parked or indeterminate intent.
	Runbook *runbookEntry
	// Lookup says when an indeterminate intent's one lookup is due, or that it is claimed.
	Lookup string
}

// waiting is why an intent waits: Cause as atmost_account_waiting_intents names it, Why as an
// operator reads it.
type waiting struct {
	Cause, Why string
}

type attemptRow struct {
	Attempt  ledger.Attempt
	Evidence []ledger.Evidence
	Steps    []ledger.ReconciliationStep
}

// verbs says what a person may do with in now, and why not the rest: the state machine's
// table, as the ledger's guards will hold it. attemptCap is the account's: a parked intent is
// sent again ("resend": resolved as failed, then retried) only where its runbook offers it and
// the retry would not meet the cap, so that both steps are allowed.
func verbs(in ledger.Intent, now time.Time, attemptCap int) []allowed {
	leaseLive := in.LeaseExpiresAt != nil && in.LeaseExpiresAt.After(now)
	park := allowed{Verb: "park", OK: true}
	resolve := allowed{Verb: "resolve"}
	retry := allowed{Verb: "retry"}
	switch in.State {
	case ledger.Parked:
		park = allowed{Verb: "park", WhyNot: "it is parked already: a person owns it"}
		resolve.OK = true
		retry.WhyNot = "it is parked: if it was not sent, resolve it as failed with your evidence first, then retry it"
	case ledger.Published:
		park.OK, park.WhyNot = false, "it is published: the platform holds it, and a published intent never moves again"
		resolve.WhyNot, retry.WhyNot = park.WhyNot, park.WhyNot
	case ledger.Failed:
		resolve.WhyNot = "only a parked intent is resolved by a person: park it first"
		retry.OK = true
	case ledger.Indeterminate:
		resolve.WhyNot = "only a parked intent is resolved by a person: park it, then resolve it with evidence"
		retry.WhyNot = "its outcome is unknown, so it is never retried (a resend could deliver it twice); the reconciler looks it up once"
	case ledger.Authorized:
		if leaseLive {
			park.OK, park.WhyNot = false, "it is authorized and its worker's lease is live: bytes may be leaving right now; its outcome, or its lease's expiry into indeterminate, comes first"
		}
		resolve.WhyNot = "only a parked intent is resolved by a person"
		retry.WhyNot = "only a failed intent can be retried: this one may be on the wire"
	case ledger.Pending:
		resolve.WhyNot = "only a parked intent is resolved by a person"
		retry.WhyNot = "it is already on its way; only a failed intent can be retried"
	}
	if in.State != ledger.Parked {
		return []allowed{park, resolve, retry}
	}
	resend := allowed{Verb: "resend", OK: true}
	switch {
	case !fits(in.Reason, fitResend):
		resend = allowed{Verb: "resend", WhyNot: fmt.Sprintf("the runbook of %s does not send it again: %s", in.Reason, strings.TrimSuffix(runbook[in.Reason].Then, "."))}
	case in.AttemptsAuthorized >= attemptCap:
		resend = allowed{Verb: "resend", WhyNot: fmt.Sprintf("it has used %d of its account's attempt cap of %d, so the retry would park it again (attempts_exhausted): raise the cap (Controls) first", in.AttemptsAuthorized, attemptCap)}
	}
	return []allowed{park, resolve, retry, resend}
}

// verbAllowed says whether verb may be used on in now, and why not.
func verbAllowed(in ledger.Intent, now time.Time, attemptCap int, verb string) (bool, string) {
	for _, a := range verbs(in, now, attemptCap) {
		if a.Verb == verb {
			return a.OK, a.WhyNot
		}
	}
	return false, "only a parked intent is resolved as not sent and sent again"
}

// holdText says what holds an account, who set it and why.
func holdText(h ledger.Hold) string {
	var what string
	switch {
	case h.Reason == ledger.ReasonKillSwitch && h.Scope == ledger.GlobalScope:
		what = "the global kill switch is on"
	case h.Reason == ledger.ReasonKillSwitch:
		what = "its kill switch is on"
	case h.Reason == ledger.ReasonAccountDisabled:
		what = "disabled (atmost accounts enable serves it again; its intents wait)"
	case h.Reason == ledger.ReasonCredentialRevoked:
		what = "credential revoked (atmost accounts rotate gives it a new one)"
	case h.Reason == ledger.ReasonHeld:
		// Its health: no operator did it, so no "by"; state, cause, since and what ends it.
		what = fmt.Sprintf("%s (%s), its intents wait", h.Health, h.Why)
		if h.Since != nil {
			what += " since " + h.Since.UTC().Format(time.RFC3339)
		}
		if h.NextProbe != nil {
			return what + "; next probe " + h.NextProbe.UTC().Format(time.RFC3339)
		}
		return what + "; no probe: atmost accounts resume ends it"
	default:
		what = string(h.Reason)
	}
	if h.By != "" {
		what += ", by " + h.By
		if h.Why != "" {
			what += ": " + h.Why
		}
	}
	return what
}

func (s *Server) intent(w http.ResponseWriter, r *http.Request, v visitor) {
	d, status, err := s.intentDataOf(r)
	switch {
	case err != nil:
		s.fail(w, err)
	case status == http.StatusNotFound:
		http.Error(w, "no intent has the delivery key "+r.PathValue("key"), status)
	default:
		s.render(w, http.StatusOK, "intent", v, d)
	}
}

// intentDataOf reads what the intent page, and the API, show of the intent the path's key
// names: status 404 when none has it.
func (s *Server) intentDataOf(r *http.Request) (intentData, int, error) {
	key, ok := parseKey(r.PathValue("key"))
	if !ok {
		return intentData{}, http.StatusNotFound, nil
	}
	rec, err := s.l.Inspect(r.Context(), key)
	if errors.Is(err, ledger.ErrNotFound) {
		return intentData{}, http.StatusNotFound, nil
	}
	if err != nil {
		return intentData{}, 0, err
	}
	p, err := s.l.PolicyFor(r.Context(), rec.Intent.Account)
	if err != nil {
		return intentData{}, 0, err
	}
	d := intentData{Rec: rec, Text: requestText(rec.Intent.Request), Meaning: reasonMeaning[rec.Intent.Reason], Verbs: verbs(rec.Intent, time.Now(), p.AttemptCap)}
	if e, ok := runbook[rec.Intent.Reason]; ok {
		d.Runbook = &e
	}
	if rec.Intent.State == ledger.Indeterminate {
		if d.Lookup, err = s.lookupDue(r, rec); err != nil {
			return intentData{}, 0, err
		}
	}
	if hold, ok := rec.TextHold(); ok {
		d.Hold = &hold
	}
	wait, err := adapters.IntentWait(r.Context(), s.l, s.cfg.Platforms, s.cfg.LookupEnv, rec.Intent)
	if err != nil {
		return intentData{}, 0, err
	}
	if wait != nil {
		d.Waiting = &waiting{Cause: wait.Cause, Why: wait.String()}
	}
	for _, a := range rec.Attempts {
		row := attemptRow{Attempt: a}
		for _, e := range rec.Evidence {
			if e.Token == a.Token {
				row.Evidence = append(row.Evidence, e)
			}
		}
		for _, st := range rec.Reconciliations {
			if st.Token == a.Token {
				row.Steps = append(row.Steps, st)
			}
		}
		d.AttemptRows = append(d.AttemptRows, row)
	}
	if d.Events, d.EventsNote, err = s.eventsOf(r, rec); err != nil {
		return intentData{}, 0, err
	}
	return d, 0, nil
}

// lookupDue says when the one lookup of rec, an indeterminate intent, is due: the account's
// reconcile delay after it became indeterminate, as the reconciler waits it out (by the
// database's clock), or that the lookup is claimed already.
func (s *Server) lookupDue(r *http.Request, rec ledger.Record) (string, error) {
	in := rec.Intent
	st, err := s.l.ReconcileStatusOf(r.Context(), in.Key)
	if err != nil {
		return "", err
	}
	if st.Claimed {
		for _, step := range rec.Reconciliations {
			if step.Token == in.Token && step.Result == "" {
				return fmt.Sprintf("Its one lookup was claimed at %s by %s: its result decides.", step.At.UTC().Format("2006-01-02 15:04:05Z"), step.Actor), nil
			}
		}
		return "Its one lookup is claimed: its result decides.", nil
	}
	unclaimed := " If no reconciler claims it, the sweeper parks it once it has waited the sweeper's --unreconciled-after."
	acct, err := s.l.Account(r.Context(), in.Account)
	if err != nil {
		return "", err
	}
	caps, err := adapters.CapabilitiesOf(s.cfg.Platforms, acct, s.cfg.LookupEnv)
	if err != nil {
		return fmt.Sprintf("No lookup can be made while the account's adapter does not open (%v): fix the account (atmost accounts update).", err) + unclaimed, nil
	}
	now := time.Now()
	since := now.Add(-st.Age)
	due := since.Add(caps.ReconcileDelay)
	if due.After(now) {
		return fmt.Sprintf("Its one lookup is due at %s (in %s): the account's reconcile delay of %s after it became indeterminate.",
			due.UTC().Format("2006-01-02 15:04:05Z"), due.Sub(now).Round(time.Second), caps.ReconcileDelay) + unclaimed, nil
	}
	return fmt.Sprintf("Its one lookup has been due since %s (the account's reconcile delay of %s after it became indeterminate): it waits for a reconciler (atmost_reconcile_oldest_waiting_seconds).",
		due.UTC().Format("2006-01-02 15:04:05Z"), caps.ReconcileDelay) + unclaimed, nil
}

// requestText is the request's "text" field, when it has one.
func requestText(request string) string {
	var m map[string]any
	if err := jsonUnmarshal([]byte(request), &m); err != nil {
		return ""
	}
	t, _ := m["text"].(string)
	return t
}

type rejectsData struct {
	Reason   string
	Rows     []ledger.StoredRejection
	Reasons  []identity.Reason
	Accounts []string
	// Form is the replay form as last posted; Problems what was wrong with it.
	Form     replayForm
	Problems []string
}

func (s *Server) rejects(w http.ResponseWriter, r *http.Request, v visitor) {
	reason := strings.TrimSpace(r.URL.Query().Get("reason"))
	s.renderRejects(w, r, v, replayForm{Reason: reason}, nil, http.StatusOK)
}

// renderRejects shows the rejects of the form's reason (any without one), newest first, with
// the replay form as f fills it and the problems of its last post.
func (s *Server) renderRejects(w http.ResponseWriter, r *http.Request, v visitor, f replayForm, problems []string, status int) {
	reason := f.Reason
	if f.one() {
		reason = ""
	}
	rows, err := s.l.Rejects(r.Context(), reason, 200)
	if err != nil {
		s.fail(w, err)
		return
	}
	accounts, err := s.accountIDs(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, status, "rejects", v, rejectsData{Reason: reason, Rows: rows, Reasons: identity.AllReasons(), Accounts: accounts, Form: f, Problems: problems})
}
