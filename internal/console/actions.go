package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// The actions. Each is previewed first (what it will do, computed from the ledger as it
// stands) and applied only with the preview's confirmation, through the same ledger operation
// the atmost command calls, with "console:NAME" as the actor and the person's reason. The
// preview remembers the intent's transition number; an intent that moved since is refused
// without a call (the person saw something else), and the ledger's guarded statement refuses
// whatever moves after that.

// confirmData is the confirmation page: what the change will do, and the form that applies it.
type confirmData struct {
	Title   string
	Effect  []string
	Action  string            // the form's URL
	Fields  map[string]string // carried as hidden fields
	Confirm string
	Back    string
	Sample  []ledger.Intent // a bulk action's first intents
	Count   int
	// A replay's preview: its dry run's counts and first rejects. Confirm is empty when the
	// replay would do nothing.
	Totals  *ingest.ReplayTotals
	Rejects []replayRow
}

type resultData struct {
	Title   string
	Changed int
	// ChangedKeys are the intents a bulk action changed, each linked on the result page.
	ChangedKeys []identity.DeliveryKey
	Refused     []refusal
	Back        string
	Event       string
}

type refusal struct {
	Key identity.DeliveryKey
	Why string
	// Moved: the intent moved since the preview.
	Moved bool
}

// actForm is a change of one intent as the intent page's form, or the API's body, carries it:
// the verb (park, resolve, retry, resend), the state a resolve leads to and its object, why, and
// the intent's seq at the preview ("" before it).
type actForm struct {
	verb, to, objectID, note, seq string
}

func actFormOf(form url.Values) actForm {
	return actForm{verb: form.Get("verb"), to: form.Get("to"), objectID: strings.TrimSpace(form.Get("object_id")),
		note: strings.TrimSpace(form.Get("note")), seq: form.Get("seq")}
}

// problem says what is wrong with the form, "" when nothing is; a form without a problem
// names no state or object but a resolve's.
func (a *actForm) problem() string {
	switch {
	case a.verb != "park" && a.verb != "resolve" && a.verb != "retry" && a.verb != "resend":
		return "choose park, resolve, retry, or not sent, send again"
	case a.note == "":
		return "say why (for a resolve: how you know): it is written to the history with your name"
	case a.verb == "resolve" && a.to != "published" && a.to != "failed":
		return "a parked intent resolves as published or as failed"
	case a.verb == "resolve" && a.to == "published" && a.objectID == "":
		return "resolving as published needs the platform's id of the object you found"
	case a.verb == "resolve" && a.to == "failed" && a.objectID != "":
		return "an intent that was not sent has no object: leave the object id empty to resolve it as failed"
	}
	if a.verb != "resolve" {
		a.to, a.objectID = "", ""
	}
	return ""
}

// digest binds a confirmation to exactly this change of key, at the seq the preview saw.
func (a actForm) digest(key identity.DeliveryKey) string {
	return digest("intent", key.String(), a.verb, a.to, a.objectID, a.note, a.seq)
}

// actTarget reads the intent a checked form changes: status 404 and why when none has its key,
// or 0. err is the ledger's.
func (s *Server) actTarget(r *http.Request, key identity.DeliveryKey) (in ledger.Intent, status int, why string, err error) {
	in, err = s.l.Get(r.Context(), key)
	if errors.Is(err, ledger.ErrNotFound) {
		return in, http.StatusNotFound, "no intent has the delivery key " + key.String(), nil
	}
	return in, 0, "", err
}

// resendRefused says why "not sent, send again" is not allowed on in as it stands, checked at
// the preview and again at the confirmation: both steps must be, the resolve and the retry
// after it. "" when it is (or a is another verb).
func (s *Server) resendRefused(r *http.Request, v visitor, in ledger.Intent, a actForm) (string, error) {
	if a.verb != "resend" {
		return "", nil
	}
	p, err := s.l.PolicyFor(r.Context(), in.Account)
	if err != nil {
		return "", err
	}
	if ok, whyNot := verbAllowed(in, time.Now(), p.AttemptCap, a.verb); !ok {
		s.audit(r, v, "not sent, send again", in.Key.String(), "refused: "+whyNot)
		return "not sent, send again is not allowed now: " + whyNot, nil
	}
	return "", nil
}

// actPreview previews a on in: its effect, and a confirmation bound to a at in's seq now.
func (s *Server) actPreview(ctx context.Context, v visitor, in ledger.Intent, a actForm) (confirmData, error) {
	effect, err := s.effect(ctx, in, a.verb, a.to, a.objectID)
	if err != nil {
		return confirmData{}, err
	}
	effect = append(effect, fmt.Sprintf("Recorded as %s: %q.", v.actor(), a.note))
	a.seq = strconv.FormatInt(in.Seq, 10)
	back := "/intents/" + in.Key.String()
	fields := map[string]string{"verb": a.verb, "note": a.note, "to": a.to, "object_id": a.objectID, "seq": a.seq}
	return confirmData{Title: verbTitle(a.verb, a.to) + " " + in.Key.String(), Effect: effect,
		Action: back + "/act", Fields: fields, Confirm: s.issue(v, a.digest(in.Key), nil), Back: back}, nil
}

func (s *Server) act(w http.ResponseWriter, r *http.Request, v visitor) {
	key, ok := parseKey(r.PathValue("key"))
	if !ok {
		http.Error(w, "not a delivery key", http.StatusNotFound)
		return
	}
	a := actFormOf(r.PostForm)
	back := "/intents/" + key.String()
	if problem := a.problem(); problem != "" {
		s.flash(v, "Nothing was changed: "+problem+".")
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	in, status, why, err := s.actTarget(r, key)
	switch {
	case err != nil:
		s.fail(w, err)
		return
	case status != 0:
		http.Error(w, why, status)
		return
	}
	if why, err := s.resendRefused(r, v, in, a); err != nil || why != "" {
		if err != nil {
			s.fail(w, err)
			return
		}
		s.flash(v, "Nothing was changed: "+why+".")
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	confirm := r.PostFormValue("confirm")
	if confirm == "" {
		d, err := s.actPreview(r.Context(), v, in, a)
		if err != nil {
			s.fail(w, err)
			return
		}
		s.render(w, http.StatusOK, "confirm", v, d)
		return
	}
	if _, ok := s.redeem(v, confirm, a.digest(key)); !ok {
		s.refuseConfirmation(w, v, back)
		return
	}
	if a.verb == "resend" {
		res, err := s.resend(r, v, a.note, in, a.seq)
		if err != nil {
			s.fail(w, err)
			return
		}
		s.flash(v, res.message)
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	refused, err := s.apply(r, v, change{verb: a.verb, to: a.to, objectID: a.objectID, note: a.note, in: in, seq: a.seq})
	if err != nil {
		s.fail(w, err)
		return
	}
	if refused != nil {
		s.flash(v, "Refused, nothing was changed: "+refused.why)
	} else {
		s.flash(v, verbTitle(a.verb, a.to)+": done, by "+v.actor()+". "+s.publish(r.Context(), []identity.DeliveryKey{key}))
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// refuseConfirmation answers a confirmation that is used, expired, another session's or for
// another change: nothing is applied.
func (s *Server) refuseConfirmation(w http.ResponseWriter, v visitor, back string) {
	s.render(w, http.StatusConflict, "result", v, resultData{Title: "Refused: this confirmation was used already, has expired, or is for another change. Nothing was changed; preview it again.", Back: back})
}

func verbTitle(verb, to string) string {
	switch verb {
	case "park":
		return "Park"
	case "retry":
		return "Retry"
	case "resolve-failed":
		return "Resolve as failed"
	case "resend":
		return "Not sent, send again"
	}
	if to == "published" {
		return "Resolve as published"
	}
	return "Resolve as failed"
}

// effect says what verb will do to in, as the state machine says.
func (s *Server) effect(ctx context.Context, in ledger.Intent, verb, to, objectID string) ([]string, error) {
	from := fmt.Sprintf("%s (%s)", in.State, in.Reason)
	switch verb {
	case "park":
		return []string{from + " → parked (operator_parked).", "No machine moves it on from then on: a person resolves it."}, nil
	case "retry":
		p, err := s.l.PolicyFor(ctx, in.Account)
		if err != nil {
			return nil, err
		}
		return []string{from + " → pending (retried), with a new work item; no attempt is opened until a dispatcher takes it.",
			fmt.Sprintf("%d of the account's attempt cap of %d are used: at the cap it is parked (attempts_exhausted) instead.", in.AttemptsAuthorized, p.AttemptCap)}, nil
	}
	if verb == "resend" {
		p, err := s.l.PolicyFor(ctx, in.Account)
		if err != nil {
			return nil, err
		}
		return []string{from + " → failed (operator_failed) → pending (retried), with a new work item; no attempt is opened until a dispatcher takes it.",
			"Two steps, each through the ledger's guarded statement and each a history row under your name: it is resolved as failed (it was not sent, and its text is released), then retried.",
			"If the retry is refused (the intent moved, or it met its cap meanwhile), the first step stands: it stays failed, or is parked at its cap (attempts_exhausted), and the result says so.",
			fmt.Sprintf("%d of the account's attempt cap of %d are used.", in.AttemptsAuthorized, p.AttemptCap)}, nil
	}
	if to == "published" {
		return []string{from + " → published (operator_published), object " + objectID + ".", "Final: a published intent never moves again and is never sent."}, nil
	}
	return []string{from + " → failed (operator_failed).", "Its text is released; a retry (by policy or a person) may send it again."}, nil
}

// change is one change of an intent a person confirmed: the verb (park, retry, resolve,
// resolve-failed), the state a resolve leads to and its object, the person's note, the intent as
// previewed and its seq then ("" to skip the check), and, for a bulk park, the states it parks
// from.
type change struct {
	verb, to, objectID, note string
	in                       ledger.Intent
	seq                      string
	from                     []ledger.State
}

// refusedChange is why a change was refused and nothing was changed.
type refusedChange struct {
	why string
	// moved says the intent is not as its preview showed it: it moved since (the API's 409),
	// where otherwise the change itself is refused (its 422).
	moved bool
}

// apply makes the change through the ledger, logs it, and returns why it was refused (nil when
// made). from, when given, holds a park to those states (a bulk park's).
func (s *Server) apply(r *http.Request, v visitor, c change) (refused *refusedChange, err error) {
	verb, to, objectID, note, in, from := c.verb, c.to, c.objectID, c.note, c.in, c.from
	defer func() {
		result := "done"
		switch {
		case err != nil:
			result = "failed: " + err.Error()
		case refused != nil:
			result = "refused: " + refused.why
		}
		s.audit(r, v, strings.ToLower(verbTitle(verb, to)), in.Key.String(), result)
	}()
	if c.seq != "" && c.seq != strconv.FormatInt(in.Seq, 10) {
		return &refusedChange{fmt.Sprintf("%s moved since the preview (it is now %s, %s): look at it again.", in.Key, in.State, in.Reason), true}, nil
	}
	ctx := r.Context()
	switch {
	case verb == "park" && from != nil:
		err = s.l.ParkFrom(ctx, in.Key, from, ledger.Actor{Name: v.actor(), Reason: note})
	case verb == "park":
		err = s.l.Park(ctx, in.Key, ledger.Actor{Name: v.actor(), Reason: note})
	case verb == "retry":
		err = s.l.RetryAs(ctx, in.Key, ledger.Actor{Name: v.actor(), Reason: note})
	case verb == "resolve", verb == "resolve-failed":
		state := ledger.Failed
		if to == "published" {
			state = ledger.Published
		}
		err = s.l.Resolve(ctx, in.Key, state, objectID, ledger.Actor{Name: v.actor(), Reason: note})
	}
	var refusal *ledger.RefusedError
	switch {
	case err == nil:
		return nil, nil
	case errors.As(err, &refusal) && errors.Is(err, ledger.ErrAttemptsExhausted):
		return &refusedChange{why: fmt.Sprintf("%s reached its attempt cap, so it was parked (attempts_exhausted) instead of retried.", in.Key)}, nil
	case errors.As(err, &refusal):
		// In the state it was read in, the change does not apply; in another, it moved.
		return &refusedChange{fmt.Sprintf("%s is %s: the ledger refused to %s it (%v).", in.Key, refusal.State, strings.ToLower(verbTitle(verb, to)), refusal.Err),
			refusal.State != in.State}, nil
	case errors.Is(err, ledger.ErrInvalidNote):
		return &refusedChange{why: err.Error()}, nil
	}
	return nil, err
}

// resent is what "not sent, send again" came to: the message, and why its first step was
// refused (nil when it was made; the retry's refusal is in the message).
type resent struct {
	message string
	refused *refusedChange
}

// resend applies "not sent, send again" to in: the ledger's guarded Resolve (to failed) and then
// its guarded RetryAs, each a history row and an audit line of its own. A refused first step
// changes nothing; a refused second leaves the first, and the message says which state the
// intent is in.
func (s *Server) resend(r *http.Request, v visitor, note string, in ledger.Intent, seq string) (resent, error) {
	refused, err := s.apply(r, v, change{verb: "resolve", to: "failed", note: note, in: in, seq: seq})
	if err != nil {
		return resent{}, err
	}
	if refused != nil {
		return resent{"Refused, nothing was changed: " + refused.why, refused}, nil
	}
	first := "Resolved as failed (operator_failed), by " + v.actor() + "; "
	refused, err = s.apply(r, v, change{verb: "retry", note: note, in: in})
	switch {
	case err != nil:
		return resent{message: first + "the retry then failed (" + err.Error() + "), so it is failed now: retry it from this page. " + s.publish(r.Context(), []identity.DeliveryKey{in.Key})}, nil
	case refused != nil:
		return resent{message: first + "the retry was refused: " + refused.why + " " + s.publish(r.Context(), []identity.DeliveryKey{in.Key})}, nil
	}
	return resent{message: "Not sent, send again: done, by " + v.actor() + ": resolved as failed, then retried. " + s.publish(r.Context(), []identity.DeliveryKey{in.Key})}, nil
}

// publish publishes the changes' events right away when the console reads JetStream, and
// says where they are.
func (s *Server) publish(ctx context.Context, keys []identity.DeliveryKey) string {
	switch now, err := s.publishNow(ctx, keys); {
	case !now:
		return "Its event is in the outbox: the next relay round of a running role publishes it."
	case err != nil:
		return "Publishing its event failed (" + err.Error() + "); it stays in the outbox for the next relay round."
	}
	return "Its event is published on ATMOST_EVENTS."
}

// publishNow has the relay publish the outbox rows of keys (events, and the work items of new
// intents) when the console reads JetStream; now is false when it does not, and the next relay
// round of a running role publishes them. A failure leaves them in the outbox for that round.
func (s *Server) publishNow(ctx context.Context, keys []identity.DeliveryKey) (now bool, err error) {
	if s.relay == nil || len(keys) == 0 {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	return true, s.relay.AfterCommit(ctx, keys)
}

// bulkMax is how many intents one bulk action may change: beyond it, narrow the filter.
const bulkMax = 1000

// bulkVerbs are the bulk actions and the states each may start from.
var bulkVerbs = map[string][]ledger.State{
	"park":           {ledger.Pending, ledger.Failed, ledger.Indeterminate},
	"resolve-failed": {ledger.Parked},
	"retry":          {ledger.Failed},
}

// bulkOrder is the order the bulk page offers its actions in.
var bulkOrder = []string{"resolve-failed", "retry", "park"}

// bulkPlan is a previewed bulk action: exactly the intents previewed, each with the
// transition it was at.
type bulkPlan struct {
	verb, note string
	items      []ledger.Intent
}

// stateN is how many intents of a bulk set are in a state.
type stateN struct {
	State ledger.State
	N     int
}

// verbOption is an action the bulk page offers for its set.
type verbOption struct {
	Value, Title string
}

type bulkData struct {
	Filter   listFilter
	Problems []string
	States   []ledger.State
	Reasons  []ledger.Reason
	Accounts []string
	Verb     string
	Note     string
	// Chosen: a set is chosen, by filter or by selection, and counted.
	Chosen bool
	// Keys are the selected intents' keys, for a set chosen by selection; none for a filter's.
	Keys []string
	// FilterFields carry the filter to the action's form.
	FilterFields map[string]string
	// Count is the set's exact size; ByState its intents by state.
	Count   int
	ByState []stateN
	// Verbs are the actions that fit every intent of the set, by the states they start from.
	Verbs []verbOption
}

// fittingVerbs are the bulk actions that apply to an intent in each of states.
func fittingVerbs(states []ledger.State) []verbOption {
	var out []verbOption
	for _, verb := range bulkOrder {
		ok := len(states) > 0
		for _, st := range states {
			ok = ok && slices.Contains(bulkVerbs[verb], st)
		}
		if ok {
			out = append(out, verbOption{verb, fmt.Sprintf("%s (%s)", strings.ToLower(verbTitle(verb, "")), statesText(bulkVerbs[verb]))})
		}
	}
	return out
}

// chooses says whether the filter chooses anything: the bulk page counts a set only then.
func (lf listFilter) chooses() bool { return len(lf.Query()) > 0 }

func (s *Server) bulkForm(w http.ResponseWriter, r *http.Request, v visitor) {
	lf, problems := parseFilter(r.URL.Query())
	s.renderBulk(w, r, v, lf, nil, problems, r.URL.Query().Get("verb"), "", http.StatusOK)
}

// bulkSet reads the intents a bulk action would change: the selected keys, or those the filter
// matches, at most bulkMax. problem says why there is no set to act on.
func (s *Server) bulkSet(r *http.Request, lf listFilter, keys []string) (items []ledger.Intent, problem string, err error) {
	if len(keys) > 0 {
		if len(keys) > bulkMax {
			return nil, fmt.Sprintf("%d intents are selected: one bulk action changes at most %d", len(keys), bulkMax), nil
		}
		seen := map[string]bool{}
		for _, raw := range keys {
			k, ok := parseKey(raw)
			if !ok {
				return nil, fmt.Sprintf("%q is not a delivery key", raw), nil
			}
			if seen[k.String()] {
				continue
			}
			seen[k.String()] = true
			in, err := s.l.Get(r.Context(), k)
			if errors.Is(err, ledger.ErrNotFound) {
				return nil, "no intent has the delivery key " + k.String(), nil
			}
			if err != nil {
				return nil, "", err
			}
			items = append(items, in)
		}
		return items, "", nil
	}
	var after ledger.BrowseCursor
	for len(items) <= bulkMax {
		pg, err := s.l.Browse(r.Context(), lf.f, after, 500)
		if err != nil {
			return nil, "", err
		}
		items = append(items, pg.Intents...)
		if pg.Next == nil {
			break
		}
		after = *pg.Next
	}
	switch {
	case len(items) > bulkMax:
		return nil, fmt.Sprintf("more than %d intents match: narrow the filter (a state, an account, a time range) and act on them in parts", bulkMax), nil
	case len(items) == 0:
		return nil, "no intent matches this filter: nothing to do", nil
	}
	return items, "", nil
}

// statesOf counts items by state, in the overview's order.
func statesOf(items []ledger.Intent) []stateN {
	n := map[ledger.State]int{}
	for _, in := range items {
		n[in.State]++
	}
	var out []stateN
	for _, st := range waitingOrder {
		if n[st] > 0 {
			out = append(out, stateN{st, n[st]})
		}
	}
	return out
}

// renderBulk shows the bulk page: the filter, and for a chosen set (keys, or a filter that
// chooses) its exact count by state and the actions that fit all of it.
func (s *Server) renderBulk(w http.ResponseWriter, r *http.Request, v visitor, lf listFilter, keys []string, problems []string, verb, note string, status int) {
	accounts, err := s.accountIDs(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	d := bulkData{Filter: lf, Problems: problems, States: atmosttype.States(), Reasons: sortedReasons(), Accounts: accounts, Verb: verb, Note: note,
		Keys: keys, FilterFields: map[string]string{}}
	for k, vs := range lf.Query() {
		d.FilterFields[k] = vs[0]
	}
	if v.canChange() && (len(keys) > 0 || lf.chooses()) {
		items, problem, err := s.bulkSet(r, lf, keys)
		if err != nil {
			s.fail(w, err)
			return
		}
		if problem != "" {
			d.Problems = append(d.Problems, problem)
		} else {
			d.Chosen, d.Count, d.ByState = true, len(items), statesOf(items)
			var states []ledger.State
			for _, sn := range d.ByState {
				states = append(states, sn.State)
			}
			d.Verbs = fittingVerbs(states)
		}
	}
	s.render(w, status, "bulk", v, d)
}

// selectionDigest names a selection of intents by their keys, in order.
func selectionDigest(items []ledger.Intent) string {
	keys := make([]string, len(items))
	for i, in := range items {
		keys[i] = in.Key.String()
	}
	sort.Strings(keys)
	return digest(keys...)
}

// bulkDigest binds a bulk confirmation to its verb, its note and what it chooses: a selection
// by its digest (sel), else the filter.
func bulkDigest(verb, note string, lf listFilter, sel string) string {
	chosen := lf.Query().Encode()
	if sel != "" {
		chosen = "sel:" + sel
	}
	return digest("bulk", verb, note, chosen)
}

// bulkPreview previews verb on the intents keys or lf choose, for the confirmation the plan
// is issued with; otherwise it returns problems, each a reason nothing is issued.
func (s *Server) bulkPreview(r *http.Request, v visitor, lf listFilter, keys []string, verb, note string) (confirmData, []string, error) {
	items, problem, err := s.bulkSet(r, lf, keys)
	if err != nil || problem != "" {
		return confirmData{}, []string{problem}, err
	}
	var states []ledger.State
	for _, sn := range statesOf(items) {
		states = append(states, sn.State)
	}
	var problems []string
	from, known := bulkVerbs[verb]
	switch {
	case !known:
		problems = append(problems, "choose the action: resolve as failed, retry, or park")
	case !slices.ContainsFunc(fittingVerbs(states), func(o verbOption) bool { return o.Value == verb }):
		problems = append(problems, fmt.Sprintf("%s applies to intents in %s, and these are in %s: choose the intents of one state", verbTitle(verb, ""), statesText(from), statesText(states)))
	}
	if note == "" {
		problems = append(problems, "say why (for a resolve: how you know): it is written to every intent's history with your name")
	}
	if len(problems) > 0 {
		return confirmData{}, problems, nil
	}
	effect := []string{fmt.Sprintf("%s %d intents, each through the ledger's guarded statement; an intent that moved since this preview is refused and left as it is.", verbTitle(verb, ""), len(items))}
	switch verb {
	case "park":
		effect = append(effect, "Each becomes parked (operator_parked): no machine moves it on.")
	case "resolve-failed":
		effect = append(effect, "Each becomes failed (operator_failed): its text is released, and a retry may send it again.")
	case "retry":
		effect = append(effect, "Each goes back to pending (retried) with a new work item, or is parked at its attempt cap.")
	}
	effect = append(effect, fmt.Sprintf("Recorded as %s: %q.", v.actor(), note))
	fields := map[string]string{"verb": verb, "note": note}
	back, sel := "/bulk?"+lf.Query().Encode(), ""
	if len(keys) > 0 {
		sel, back = selectionDigest(items), "/intents"
		fields["sel"] = sel
	} else {
		for k, vs := range lf.Query() {
			fields[k] = vs[0]
		}
	}
	plan := &bulkPlan{verb: verb, note: note, items: items}
	return confirmData{Title: fmt.Sprintf("%s: %d intents", verbTitle(verb, ""), len(items)), Effect: effect,
		Action: "/bulk", Fields: fields, Confirm: s.issue(v, bulkDigest(verb, note, lf, sel), plan), Back: back, Sample: items, Count: len(items)}, nil, nil
}

// redeemBulk consumes a bulk confirmation for exactly the change the form names, and returns
// the plan it previewed; nil when it is not one.
func (s *Server) redeemBulk(v visitor, confirm string, lf listFilter, form url.Values) *bulkPlan {
	c, ok := s.redeem(v, confirm, bulkDigest(form.Get("verb"), strings.TrimSpace(form.Get("note")), lf, form.Get("sel")))
	if !ok {
		return nil
	}
	plan, _ := c.plan.(*bulkPlan)
	return plan
}

func (s *Server) bulk(w http.ResponseWriter, r *http.Request, v visitor) {
	lf, problems := parseFilter(r.PostForm)
	keys := r.PostForm["key"]
	verb, note := r.PostFormValue("verb"), strings.TrimSpace(r.PostFormValue("note"))
	if confirm := r.PostFormValue("confirm"); confirm != "" {
		// A selection is carried to the confirmation by its digest; the plan holds its intents.
		back := "/bulk?" + lf.Query().Encode()
		if r.PostFormValue("sel") != "" {
			back = "/intents"
		}
		plan := s.redeemBulk(v, confirm, lf, r.PostForm)
		if plan == nil {
			s.refuseConfirmation(w, v, back)
			return
		}
		s.applyBulk(w, r, v, plan, back)
		return
	}
	if verb == "" && note == "" {
		// From the intents page's selection: its count and the actions that fit it.
		s.renderBulk(w, r, v, lf, keys, problems, "", "", http.StatusOK)
		return
	}
	if len(problems) > 0 {
		s.renderBulk(w, r, v, lf, keys, problems, verb, note, http.StatusBadRequest)
		return
	}
	d, problems, err := s.bulkPreview(r, v, lf, keys, verb, note)
	switch {
	case err != nil:
		s.fail(w, err)
	case len(problems) > 0:
		s.renderBulk(w, r, v, lf, keys, problems, verb, note, http.StatusBadRequest)
	default:
		s.render(w, http.StatusOK, "confirm", v, d)
	}
}

func statesText(states []ledger.State) string {
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

func (s *Server) applyBulk(w http.ResponseWriter, r *http.Request, v visitor, plan *bulkPlan, back string) {
	res := s.runBulk(r, v, plan)
	res.Back = back
	s.render(w, http.StatusOK, "result", v, res)
}

// runBulk applies a confirmed bulk plan, intent by intent, and says what each came to.
func (s *Server) runBulk(r *http.Request, v visitor, plan *bulkPlan) resultData {
	res := resultData{Title: fmt.Sprintf("%s: %d intents previewed", verbTitle(plan.verb, ""), len(plan.items))}
	var changed []identity.DeliveryKey
	for _, planned := range plan.items {
		in, err := s.l.Get(r.Context(), planned.Key)
		if err != nil {
			res.Refused = append(res.Refused, refusal{Key: planned.Key, Why: err.Error()})
			continue
		}
		// Each intent only from the states the bulk action starts from: the ledger's statement
		// refuses one that moved on since the preview.
		refused, err := s.apply(r, v, change{verb: plan.verb, to: "failed", note: plan.note, in: in, seq: strconv.FormatInt(planned.Seq, 10), from: bulkVerbs[plan.verb]})
		if err != nil {
			res.Refused = append(res.Refused, refusal{Key: planned.Key, Why: err.Error()})
			continue
		}
		if refused != nil {
			res.Refused = append(res.Refused, refusal{Key: planned.Key, Why: refused.why, Moved: refused.moved})
			continue
		}
		changed = append(changed, planned.Key)
	}
	res.Changed = len(changed)
	res.ChangedKeys = changed
	if len(changed) > 0 {
		res.Event = s.publish(r.Context(), changed)
	}
	return res
}
