package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// Replaying stored rejects, the Rejects page's action: one reject from its row, or every reject
// a filter chooses (reason, account, received since). The preview is a dry run of the replay
// (ingest.ReplayPage with DryRun: the call atmost rejects replay makes, rolled back), with its
// counts and its first rejects; the confirmation replays the rejects previewed, and only those,
// through the same call, under the operator and the reason, each written to the control history
// (kind reject_replay) as the CLI writes it. A reject stored after the preview waits for another
// replay: the person never replays what they did not see.

// replayForm is a replay as its form carries it: one reject (ID, Stream, Seq: where its message
// was) or a filter, whether to replay again what a replay stored before, and why.
type replayForm struct {
	ID, Stream, Seq        string
	Reason, Account, Since string
	Again                  bool
	Note                   string
}

func readReplayForm(q url.Values) replayForm {
	return replayForm{ID: strings.TrimSpace(q.Get("id")), Stream: strings.TrimSpace(q.Get("stream")), Seq: strings.TrimSpace(q.Get("seq")),
		Reason: strings.TrimSpace(q.Get("reason")), Account: strings.TrimSpace(q.Get("account")), Since: strings.TrimSpace(q.Get("since")),
		Again: q.Get("again") == "on", Note: strings.TrimSpace(q.Get("note"))}
}

// one says the form replays one reject rather than a filter's.
func (f replayForm) one() bool { return f.ID != "" }

// digest names the replay a confirmation is for: every field of the form.
func (f replayForm) digest() string {
	return digest("replay", f.ID, f.Stream, f.Seq, f.Reason, f.Account, f.Since, strconv.FormatBool(f.Again), f.Note)
}

// fields are the form's values as the confirmation page carries them back.
func (f replayForm) fields() map[string]string {
	m := map[string]string{"note": f.Note}
	for k, v := range map[string]string{"id": f.ID, "stream": f.Stream, "seq": f.Seq, "reason": f.Reason, "account": f.Account, "since": f.Since} {
		if v != "" {
			m[k] = v
		}
	}
	if f.Again {
		m["again"] = "on"
	}
	return m
}

// rejectPos is one stored reject: its id, and where its message was (unique in the ledger).
type rejectPos struct {
	id, stream string
	seq        int64
}

// replayPlan is a previewed replay: what it chooses, who asked and why, and exactly the
// rejects the preview showed, in the order they are read.
type replayPlan struct {
	one     *rejectPos
	sel     ledger.RejectSelection
	account string
	again   bool
	note    string
	ids     map[string]bool
	last    string // the last previewed reject's id: reading stops there
}

// plan checks the form and returns the replay it asks for, or what is wrong with it.
func (f replayForm) plan() (*replayPlan, []string) {
	p := &replayPlan{account: f.Account, again: f.Again, note: f.Note}
	var problems []string
	if f.one() {
		seq, err := strconv.ParseInt(f.Seq, 10, 64)
		if err != nil || seq < 1 || f.Stream == "" {
			problems = append(problems, "the reject's stream and sequence are not ones this console wrote: replay it from its row")
		}
		p.one = &rejectPos{id: f.ID, stream: f.Stream, seq: seq}
	} else {
		if f.Reason != "" && !identity.Reason(f.Reason).Valid() {
			problems = append(problems, "reason "+strconv.Quote(f.Reason)+" is not a reason ingest refuses for")
		}
		p.sel.Reason = f.Reason
		if f.Since != "" {
			at, err := parseTime(f.Since)
			if err != nil {
				problems = append(problems, "received since: "+err.Error())
			}
			p.sel.Since = at
		}
	}
	if f.Note == "" {
		problems = append(problems, "say why (what was fixed): it is written to the control history with your name")
	}
	return p, problems
}

// errRejectGone is a reject the ledger no longer holds as the form names it.
var errRejectGone = errors.New("the ledger holds no such reject (any more)")

// eachPage calls fn with each page of the rejects p chooses, in the order ingest read them,
// until fn says stop or none is left.
func (s *Server) eachPage(ctx context.Context, p *replayPlan, fn func([]ledger.ReplayCandidate) (stop bool, err error)) error {
	if p.one != nil {
		// The one message at this position of its stream: (stream, sequence) is unique.
		page, err := s.l.RejectsToReplay(ctx, ledger.RejectSelection{}, ledger.RejectCursor{Stream: p.one.stream, Seq: p.one.seq - 1}, 1)
		if err != nil {
			return err
		}
		if len(page) == 0 || page[0].ID != p.one.id || page[0].Stream != p.one.stream || page[0].StreamSeq != p.one.seq {
			return errRejectGone
		}
		_, err = fn(page)
		return err
	}
	after := ledger.RejectCursor{}
	for {
		page, err := s.l.RejectsToReplay(ctx, p.sel, after, ingest.ReplayPageSize)
		if err != nil || len(page) == 0 {
			return err
		}
		last := page[len(page)-1]
		after = ledger.RejectCursor{Stream: last.Stream, Seq: last.StreamSeq}
		if stop, err := fn(page); err != nil || stop {
			return err
		}
	}
}

// replayRow is one reject in a replay's preview or result.
type replayRow struct {
	Stream, Reason, Subject string
	Seq                     int64
	At                      time.Time
	Outcome                 string
	Account                 string
	Key                     *identity.DeliveryKey
	Stored                  bool   // an intent has Key: its page is linked
	Now                     string // refused: the reason now; skipped: the replay before; not replayable: why
}

// rowOf shows one replayed reject; dryRun says the replay was rolled back, so an intent it
// created is not stored.
func rowOf(r ingest.Replayed, dryRun bool) replayRow {
	row := replayRow{Stream: r.Reject.Stream, Reason: r.Reject.Reason, Subject: r.Reject.Subject, Seq: r.Reject.StreamSeq, At: r.Reject.At,
		Outcome: strings.ReplaceAll(r.Outcome, "_", " "), Account: r.Result.Account, Key: r.Result.Key}
	switch ledger.ReplayOutcome(r.Outcome) {
	case ledger.ReplayAlreadyStored, ledger.ReplaySkipped:
		row.Stored = true
	case ledger.ReplayCreated:
		row.Stored = !dryRun
	}
	switch {
	case r.Outcome == ingest.NotReplayable:
		row.Now = r.Why
	case r.Result.Refusal != nil:
		row.Now = string(r.Result.Refusal.Reason) + ": " + r.Result.Refusal.Detail
	case r.Result.Replayed != nil:
		row.Now = fmt.Sprintf("replayed %s by %s", r.Result.Replayed.At.UTC().Format("2006-01-02 15:04:05Z"), r.Result.Replayed.Actor)
	}
	return row
}

// replayedData is a replay's result page.
type replayedData struct {
	Title   string
	Totals  ingest.ReplayTotals
	Rows    []replayRow
	Missing int    // previewed rejects the ledger no longer held
	Event   string // where the created intents' events and work items are
	Problem string // a page that failed: the pages before it stand
	Back    string
}

// redeemReplay consumes a replay's confirmation for exactly the replay f names, and returns
// the plan it previewed; nil when it is not one.
func (s *Server) redeemReplay(v visitor, confirm string, f replayForm) *replayPlan {
	c, ok := s.redeem(v, confirm, f.digest())
	if !ok {
		return nil
	}
	plan, _ := c.plan.(*replayPlan)
	return plan
}

// replayPreview previews the replay f asks for: a dry run, rolled back, and a confirmation for
// exactly the rejects it read (none when it would replay nothing). Otherwise it returns the
// status and the problems that refuse it.
func (s *Server) replayPreview(r *http.Request, v visitor, f replayForm, back string) (confirmData, int, []string, error) {
	plan, problems := f.plan()
	if len(problems) > 0 {
		return confirmData{}, http.StatusBadRequest, problems, nil
	}
	var all []ingest.Replayed
	opts := ledger.ReplayOptions{Actor: v.actor(), Reason: plan.note, Again: plan.again, DryRun: true}
	err := s.eachPage(r.Context(), plan, func(page []ledger.ReplayCandidate) (bool, error) {
		replayed, full, err := ingest.ReplayPage(r.Context(), s.l, page, plan.account, bulkMax+1-len(all), opts)
		all = append(all, replayed...)
		return full || len(all) > bulkMax, err
	})
	switch {
	case errors.Is(err, errRejectGone):
		return confirmData{}, http.StatusNotFound, []string{"Nothing was replayed: " + err.Error() + "."}, nil
	case err != nil:
		return confirmData{}, 0, nil, err
	case len(all) > bulkMax:
		return confirmData{}, http.StatusBadRequest, []string{fmt.Sprintf("more than %d rejects match: narrow the filter (a reason, an account, received since) and replay them in parts", bulkMax)}, nil
	case len(all) == 0:
		return confirmData{}, http.StatusOK, []string{"no reject matches this filter: nothing to replay"}, nil
	}
	var t ingest.ReplayTotals
	plan.ids = make(map[string]bool, len(all))
	for _, rep := range all {
		t.Add(rep.Outcome)
		plan.ids[rep.Reject.ID] = true
	}
	plan.last = all[len(all)-1].Reject.ID
	d := confirmData{Title: fmt.Sprintf("Replay %d %s", len(all), plural(len(all), "reject", "rejects")), Action: "/rejects/replay", Fields: f.fields(), Back: back,
		Totals: &t, Count: len(all)}
	if f.one() {
		d.Title = fmt.Sprintf("Replay one reject: message %d of %s", plan.one.seq, plan.one.stream)
	}
	for _, rep := range all[:min(len(all), 10)] {
		d.Rejects = append(d.Rejects, rowOf(rep, true))
	}
	d.Effect = []string{"A dry run of the replay, now, rolled back: nothing was changed yet. The counts below are what it would do."}
	if t.Created+t.AlreadyStored+t.Refused == 0 {
		d.Effect = append(d.Effect, "None of them would be replayed: nothing to confirm."+skippedHint(t))
	} else {
		d.Effect = append(d.Effect,
			confirmWhat(len(all))+": each stored message goes through ingest's parse again, and a valid envelope to the ledger with the statement ingest stores intents with, so a key the ledger holds is never a second intent."+skippedHint(t),
			fmt.Sprintf("Each is written to the control history (reject_replay) as %s: %q.", v.actor(), plan.note),
			createdWhere(s.relay != nil),
			"The ledger may move before you confirm (an account added, the producer publishing again): the result says what the replay did.")
		d.Confirm = s.issue(v, f.digest(), plan)
	}
	return d, 0, nil, nil
}

func (s *Server) replay(w http.ResponseWriter, r *http.Request, v visitor) {
	f := readReplayForm(r.PostForm)
	back := "/rejects"
	if f.Reason != "" && !f.one() {
		back += "?" + queryOf("reason", f.Reason)
	}
	if confirm := r.PostFormValue("confirm"); confirm != "" {
		plan := s.redeemReplay(v, confirm, f)
		if plan == nil {
			s.refuseConfirmation(w, v, back)
			return
		}
		d := s.runReplay(r, v, plan)
		d.Back = back
		s.render(w, http.StatusOK, "replayed", v, d)
		return
	}
	d, status, problems, err := s.replayPreview(r, v, f, back)
	switch {
	case err != nil:
		s.fail(w, err)
	case len(problems) > 0:
		s.renderRejects(w, r, v, f, problems, status)
	default:
		s.render(w, http.StatusOK, "confirm", v, d)
	}
}

func confirmWhat(n int) string {
	if n == 1 {
		return "Confirming replays this reject"
	}
	return "Confirming replays these rejects and only these (one stored since waits for another replay)"
}

func skippedHint(t ingest.ReplayTotals) string {
	if t.Skipped == 0 {
		return ""
	}
	return " The skipped ones were replayed before and their intents stored: tick \"again\" in the filter to replay them anyway (each then finds its intent stored)."
}

// createdWhere says where a replay's created intents' events and work items go.
func createdWhere(now bool) string {
	if now {
		return "The created intents' events and dispatch work items are published right away on ATMOST_EVENTS and ATMOST_DISPATCH."
	}
	return "The created intents' events and dispatch work items wait in the outbox for the next relay round of a running role (ingest, every second; the sweeper, every pass)."
}

// runReplay replays the rejects plan previewed, a page per transaction, and reports each.
func (s *Server) runReplay(r *http.Request, v visitor, plan *replayPlan) replayedData {
	d := replayedData{Title: fmt.Sprintf("Replay: %d %s previewed", len(plan.ids), plural(len(plan.ids), "reject", "rejects"))}
	opts := ledger.ReplayOptions{Actor: v.actor(), Reason: plan.note, Again: plan.again}
	var created []identity.DeliveryKey
	err := s.eachPage(r.Context(), plan, func(page []ledger.ReplayCandidate) (bool, error) {
		var chosen []ledger.ReplayCandidate
		stop := false
		for _, cand := range page {
			if plan.ids[cand.ID] {
				chosen = append(chosen, cand)
			}
			if cand.ID == plan.last {
				stop = true
				break
			}
		}
		replayed, _, err := ingest.ReplayPage(r.Context(), s.l, chosen, plan.account, 0, opts)
		if err != nil {
			return false, err
		}
		for _, rep := range replayed {
			d.Totals.Add(rep.Outcome)
			d.Rows = append(d.Rows, rowOf(rep, false))
		}
		created = append(created, ingest.Created(replayed, false)...)
		return stop, nil
	})
	if err != nil && !errors.Is(err, errRejectGone) {
		s.log.Warn("reject replay: " + err.Error())
		d.Problem = fmt.Sprintf("The replay stopped: %v. The pages before it stand, as reported here.", err)
	}
	d.Missing = len(plan.ids) - d.Totals.Sum()
	result := fmt.Sprintf("done: %d of %d replayed", d.Totals.Sum(), len(plan.ids))
	if d.Problem != "" {
		result = "stopped: " + d.Problem
	}
	s.audit(r, v, "replay rejects", fmt.Sprintf("%d rejects", len(plan.ids)), result)
	switch now, err := s.publishNow(r.Context(), created); {
	case len(created) == 0:
	case !now:
		d.Event = createdWhere(false)
	case err != nil:
		d.Event = "Publishing the created intents' events and work items failed (" + err.Error() + "); they stay in the outbox for the next relay round."
	default:
		d.Event = createdWhere(true)
	}
	return d
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
