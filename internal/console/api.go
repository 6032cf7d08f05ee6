package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/atmost/atmost/internal/jsonview"
	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// The console's JSON API, /api/v1 (docs/console-api.yaml): what the pages show, as JSON, and
// every change the pages make, through the very same code: the same checks, the same preview
// with its single-use confirmation bound to the session or token and to exactly the change
// previewed, the same guarded ledger operations under "console:NAME" with the reason given,
// the same audit lines. A script authenticates with "Authorization: Bearer TOKEN" (an
// operator's token); a browser's session cookie works too, and then every change carries the
// session's CSRF token (the field csrf, as the pages' forms do; GET /api/v1/me gives it).
//
// A change is two requests: the first, without confirm, previews it and answers the body to
// send again to apply it (confirm_body: the change's fields and its confirmation); nothing is
// changed before that second request. Every refusal is {"error": {"code", "message"}}, with a
// status a script can act on: 401 no or a wrong token, 403 a viewer or a failed CSRF or
// origin check, 404 no such intent, 409 an intent that moved since its preview or a
// confirmation that is spent, expired or for another change, 422 a change that is not valid
// or that the ledger refuses, 429 too many wrong tokens.

// apiPrefix is where the API is served.
const apiPrefix = "/api/v1/"

// API error codes.
const (
	codeUnauthorized = "unauthorized"
	codeForbidden    = "forbidden"
	codeViewer       = "viewer"
	codeNotFound     = "not_found"
	codeInvalid      = "invalid"
	codeRefused      = "refused"
	codeMoved        = "moved"
	codeConfirmation = "confirmation"
	codeThrottled    = "throttled"
	codeUnavailable  = "unavailable"
)

// requestCodes are the codes of checkRequest's refusals, by status.
var requestCodes = map[int]string{http.StatusBadRequest: "bad_request", http.StatusRequestEntityTooLarge: "too_large",
	http.StatusUnsupportedMediaType: "unsupported_media_type", http.StatusUnprocessableEntity: codeInvalid}

// apiRoute is one route of the API: its net/http pattern, whether it changes the ledger (then
// a viewer is refused), and its handler.
type apiRoute struct {
	pattern string
	change  bool
	serve   func(*Server, http.ResponseWriter, *http.Request, visitor)
}

// apiRoutes are the API's routes: every one is in docs/console-api.yaml and every operation
// there is one of them (a test checks).
var apiRoutes = []apiRoute{
	{"GET /api/v1/me", false, (*Server).apiMe},
	{"GET /api/v1/intents", false, (*Server).apiIntents},
	{"GET /api/v1/intents/{key}", false, (*Server).apiIntent},
	{"GET /api/v1/intents/{key}/history", false, (*Server).apiHistory},
	{"GET /api/v1/intents/{key}/attempts", false, (*Server).apiAttempts},
	{"GET /api/v1/intents/{key}/events", false, (*Server).apiEvents},
	{"POST /api/v1/intents/{key}/actions", true, (*Server).apiAct},
	{"POST /api/v1/bulk", true, (*Server).apiBulk},
	{"GET /api/v1/rejects", false, (*Server).apiRejects},
	{"POST /api/v1/rejects/replay", true, (*Server).apiReplay},
	{"GET /api/v1/accounts", false, (*Server).apiAccounts},
	{"GET /api/v1/switches", false, (*Server).apiSwitches},
	{"POST /api/v1/switches", true, (*Server).apiSwitch},
	{"GET /api/v1/policies", false, (*Server).apiPolicies},
	{"POST /api/v1/policies", true, (*Server).apiPolicy},
	{"GET /api/v1/control-history", false, (*Server).apiControlHistory},
}

func (s *Server) apiRoutes(m *http.ServeMux) {
	for _, rt := range apiRoutes {
		h := func(w http.ResponseWriter, r *http.Request, v visitor) { rt.serve(s, w, r, v) }
		if rt.change {
			m.HandleFunc(rt.pattern, s.changes(h))
		} else {
			m.HandleFunc(rt.pattern, s.authed(h))
		}
	}
	m.HandleFunc(apiPrefix, func(w http.ResponseWriter, r *http.Request) {
		s.refuse(w, r, http.StatusNotFound, codeNotFound, "no such route or method: see docs/console-api.yaml")
	})
}

// isAPI says r is a request of the API, answered in JSON.
func isAPI(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, apiPrefix) }

// refuse answers a refusal: {"error": {"code", "message"}} on the API, plain text on a page.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, status int, code, message string) {
	if !isAPI(r) {
		http.Error(w, message, status)
		return
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="atmost console"`)
	}
	type apiError struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	s.reply(w, status, struct {
		Error apiError `json:"error"`
	}{apiError{code, message}})
}

// reply writes body as JSON with status.
func (s *Server) reply(w http.ResponseWriter, status int, body any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		s.log.Error("api: " + err.Error())
		http.Error(w, "the answer could not be written: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// apiFail answers a request the ledger could not serve.
func (s *Server) apiFail(w http.ResponseWriter, r *http.Request, err error) {
	s.log.Error("ledger error: " + err.Error())
	s.refuse(w, r, http.StatusServiceUnavailable, codeUnavailable, "the ledger could not answer: "+err.Error())
}

// readJSONForm reads an API request's JSON body into r's form, so that the API's changes are
// read by the same code as the pages' forms: an object whose values are strings, numbers,
// booleans (true is "on", false "off", as a form's checkbox and the switch's choice) or lists
// of strings (a selection's keys). Anything else is refused.
func readJSONForm(r *http.Request) error {
	form := url.Values{}
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	var body map[string]any
	if err := dec.Decode(&body); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		return fmt.Errorf("the body is not a JSON object: %w", err)
	}
	if dec.More() {
		return errors.New("the body holds more than one JSON value")
	}
	for k, raw := range body {
		switch v := raw.(type) {
		case string:
			form.Set(k, v)
		case json.Number:
			form.Set(k, v.String())
		case bool:
			form.Set(k, map[bool]string{true: "on", false: "off"}[v])
		case []any:
			for _, item := range v {
				str, ok := item.(string)
				if !ok {
					return fmt.Errorf("the field %q is a list of other than strings", clip(k))
				}
				form.Add(k, str)
			}
		case nil:
		default:
			return fmt.Errorf("the field %q is an object: give a string, a number, a boolean or a list of strings", clip(k))
		}
	}
	r.PostForm = form
	r.Form = url.Values{}
	for k, vs := range r.URL.Query() {
		r.Form[k] = vs
	}
	for k, vs := range form {
		r.Form[k] = append(vs, r.Form[k]...)
	}
	return nil
}

// jsonBody says r's body is JSON for the API to read.
func jsonBody(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json" && isAPI(r)
}

// preview is a change's preview as the API answers it: what it will do, and the body that
// applies it (its fields and its single-use confirmation), to POST to the same path. Confirm
// and ConfirmBody are absent when there is nothing to confirm (a replay that would replay
// nothing).
type preview struct {
	Title       string            `json:"title"`
	Effect      []string          `json:"effect"`
	Count       int               `json:"count,omitempty"`
	Intents     []jsonview.Intent `json:"intents,omitempty"`
	Totals      *replayTotals     `json:"totals,omitempty"`
	Rejects     []replayRowJSON   `json:"rejects,omitempty"`
	Confirm     string            `json:"confirm,omitempty"`
	ConfirmBody map[string]string `json:"confirm_body,omitempty"`
	Expires     *time.Time        `json:"confirm_expires,omitempty"`
}

func (s *Server) replyPreview(w http.ResponseWriter, d confirmData) {
	p := preview{Title: d.Title, Effect: d.Effect, Count: d.Count}
	for _, in := range d.Sample {
		p.Intents = append(p.Intents, jsonview.IntentOf(in, false))
	}
	if d.Totals != nil {
		p.Totals = totalsOf(*d.Totals)
	}
	for _, row := range d.Rejects {
		p.Rejects = append(p.Rejects, replayRowOf(row))
	}
	if d.Confirm != "" {
		p.Confirm = d.Confirm
		p.ConfirmBody = map[string]string{"confirm": d.Confirm}
		for k, v := range d.Fields {
			if v != "" {
				p.ConfirmBody[k] = v
			}
		}
		at := time.Now().Add(confirmTTL).UTC()
		p.Expires = &at
	}
	s.reply(w, http.StatusOK, p)
}

// done is a change applied, as the API answers it.
type done struct {
	Done    bool          `json:"done"`
	Message string        `json:"message"`
	Changed []string      `json:"changed"`
	Refused []refusedJSON `json:"refused"`
	Event   string        `json:"event,omitempty"`
}

type refusedJSON struct {
	Key   string `json:"key"`
	Why   string `json:"why"`
	Moved bool   `json:"moved"`
}

func (s *Server) replyDone(w http.ResponseWriter, message string, changed ...identity.DeliveryKey) {
	d := done{Done: true, Message: message, Changed: []string{}, Refused: []refusedJSON{}}
	for _, k := range changed {
		d.Changed = append(d.Changed, k.String())
	}
	s.reply(w, http.StatusOK, d)
}

// refuseChange answers a change refused: 409 when the intent moved since its preview, else 422.
func (s *Server) refuseChange(w http.ResponseWriter, r *http.Request, c *refusedChange) {
	if c.moved {
		s.refuse(w, r, http.StatusConflict, codeMoved, "refused, nothing was changed: "+c.why)
		return
	}
	s.refuse(w, r, http.StatusUnprocessableEntity, codeRefused, "refused, nothing was changed: "+c.why)
}

func (s *Server) refuseConfirmationAPI(w http.ResponseWriter, r *http.Request) {
	s.refuse(w, r, http.StatusConflict, codeConfirmation, "refused: this confirmation was used already, has expired, or is for another change; nothing was changed: preview it again")
}

func (s *Server) apiMe(w http.ResponseWriter, _ *http.Request, v visitor) {
	s.reply(w, http.StatusOK, struct {
		Operator  string `json:"operator"`
		Role      string `json:"role"`
		Actor     string `json:"actor"`
		CanChange bool   `json:"can_change"`
		CSRF      string `json:"csrf,omitempty"`
	}{v.operator, string(v.role), v.actor(), v.canChange(), v.csrf()})
}

// cursorJSON continues a list after its last intent: the query parameters after_at and
// after_key of the next page.
type cursorJSON struct {
	AfterAt  string `json:"after_at"`
	AfterKey string `json:"after_key"`
}

func (s *Server) apiIntents(w http.ResponseWriter, r *http.Request, _ visitor) {
	q := r.URL.Query()
	lf, problems := parseFilter(q)
	after, problem := cursorOf(q)
	if problem != "" {
		problems = append(problems, problem)
	}
	if len(problems) > 0 {
		s.refuse(w, r, http.StatusUnprocessableEntity, codeInvalid, strings.Join(problems, "; "))
		return
	}
	pg, err := s.l.Browse(r.Context(), lf.f, after, lf.Per)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	out := struct {
		Intents  []jsonview.Intent `json:"intents"`
		Next     *cursorJSON       `json:"next"`
		Searched bool              `json:"searched"`
	}{Intents: make([]jsonview.Intent, len(pg.Intents)), Searched: pg.Searched}
	for i, in := range pg.Intents {
		out.Intents[i] = jsonview.IntentOf(in, false)
	}
	if pg.Next != nil {
		out.Next = &cursorJSON{pg.Next.At.UTC().Format(time.RFC3339Nano), pg.Next.Key.String()}
	}
	s.reply(w, http.StatusOK, out)
}

// cursorOf reads a list's page cursor, after_at and after_key, as the intents page's links and
// the API's next carry it; problem says it is not one they wrote.
func cursorOf(q url.Values) (ledger.BrowseCursor, string) {
	at, key := q.Get("after_at"), q.Get("after_key")
	if at == "" && key == "" {
		return ledger.BrowseCursor{}, ""
	}
	t, errT := time.Parse(time.RFC3339Nano, at)
	k, okK := parseKey(key)
	if errT != nil || !okK {
		return ledger.BrowseCursor{}, "the page cursor is not one this console wrote; starting at the newest"
	}
	return ledger.BrowseCursor{At: t, Key: k}, ""
}

// intentOr reads the intent page's data, or answers 404 or the ledger's failure (false).
func (s *Server) intentOr(w http.ResponseWriter, r *http.Request) (intentData, bool) {
	d, status, err := s.intentDataOf(r)
	switch {
	case err != nil:
		s.apiFail(w, r, err)
		return d, false
	case status == http.StatusNotFound:
		s.refuse(w, r, http.StatusNotFound, codeNotFound, "no intent has the delivery key "+r.PathValue("key"))
		return d, false
	}
	return d, true
}

func (s *Server) apiIntent(w http.ResponseWriter, r *http.Request, _ visitor) {
	d, ok := s.intentOr(w, r)
	if !ok {
		return
	}
	out := struct {
		Intent  jsonview.Intent `json:"intent"`
		Meaning string          `json:"meaning"`
		Actions []allowed       `json:"actions"`
		Runbook *runbookEntry   `json:"runbook"`
		Lookup  string          `json:"lookup,omitempty"`
		Waiting *jsonview.Wait  `json:"waiting"`
	}{Intent: jsonview.IntentOf(d.Rec.Intent, true), Meaning: d.Meaning, Actions: d.Verbs, Runbook: d.Runbook, Lookup: d.Lookup}
	if d.Waiting != nil {
		out.Waiting = &jsonview.Wait{Cause: d.Waiting.Cause, Why: d.Waiting.Why}
	}
	s.reply(w, http.StatusOK, out)
}

func (s *Server) apiHistory(w http.ResponseWriter, r *http.Request, _ visitor) {
	d, ok := s.intentOr(w, r)
	if !ok {
		return
	}
	s.reply(w, http.StatusOK, struct {
		History []jsonview.Transition `json:"history"`
	}{jsonview.RecordOf(d.Rec).History})
}

func (s *Server) apiAttempts(w http.ResponseWriter, r *http.Request, _ visitor) {
	d, ok := s.intentOr(w, r)
	if !ok {
		return
	}
	rec := jsonview.RecordOf(d.Rec)
	s.reply(w, http.StatusOK, struct {
		Attempts        []jsonview.Attempt        `json:"attempts"`
		Evidence        []jsonview.Evidence       `json:"evidence"`
		Reconciliations []jsonview.Reconciliation `json:"reconciliations"`
	}{rec.Attempts, rec.Evidence, rec.Reconciliations})
}

func (s *Server) apiEvents(w http.ResponseWriter, r *http.Request, _ visitor) {
	d, ok := s.intentOr(w, r)
	if !ok {
		return
	}
	s.reply(w, http.StatusOK, struct {
		Events []eventRow `json:"events"`
		Note   string     `json:"note"`
	}{d.Events, d.EventsNote})
}

func (s *Server) apiAct(w http.ResponseWriter, r *http.Request, v visitor) {
	key, ok := parseKey(r.PathValue("key"))
	if !ok {
		s.refuse(w, r, http.StatusNotFound, codeNotFound, "not a delivery key: "+r.PathValue("key"))
		return
	}
	a := actFormOf(r.PostForm)
	if problem := a.problem(); problem != "" {
		s.refuse(w, r, http.StatusUnprocessableEntity, codeInvalid, "nothing was changed: "+problem)
		return
	}
	in, status, why, err := s.actTarget(r, key)
	switch {
	case err != nil:
		s.apiFail(w, r, err)
		return
	case status != 0:
		s.refuse(w, r, status, codeNotFound, why)
		return
	}
	// A spent confirmation says so (409) before whether the change is still allowed (422): a
	// script that sends a confirmation twice learns that, where the page says what is allowed.
	confirm := r.PostFormValue("confirm")
	if confirm != "" {
		if _, ok := s.redeem(v, confirm, a.digest(key)); !ok {
			s.refuseConfirmationAPI(w, r)
			return
		}
	}
	if why, err := s.resendRefused(r, v, in, a); err != nil || why != "" {
		if err != nil {
			s.apiFail(w, r, err)
			return
		}
		s.refuse(w, r, http.StatusUnprocessableEntity, codeRefused, "nothing was changed: "+why)
		return
	}
	if confirm == "" {
		d, err := s.actPreview(r.Context(), v, in, a)
		if err != nil {
			s.apiFail(w, r, err)
			return
		}
		s.replyPreview(w, d)
		return
	}
	if a.verb == "resend" {
		res, err := s.resend(r, v, a.note, in, a.seq)
		switch {
		case err != nil:
			s.apiFail(w, r, err)
		case res.refused != nil:
			s.refuseChange(w, r, res.refused)
		default:
			s.replyDone(w, res.message, key)
		}
		return
	}
	refused, err := s.apply(r, v, change{verb: a.verb, to: a.to, objectID: a.objectID, note: a.note, in: in, seq: a.seq})
	switch {
	case err != nil:
		s.apiFail(w, r, err)
	case refused != nil:
		s.refuseChange(w, r, refused)
	default:
		s.replyDone(w, verbTitle(a.verb, a.to)+": done, by "+v.actor()+". "+s.publish(r.Context(), []identity.DeliveryKey{key}), key)
	}
}

func (s *Server) apiBulk(w http.ResponseWriter, r *http.Request, v visitor) {
	lf, problems := parseFilter(r.PostForm)
	if confirm := r.PostFormValue("confirm"); confirm != "" {
		plan := s.redeemBulk(v, confirm, lf, r.PostForm)
		if plan == nil {
			s.refuseConfirmationAPI(w, r)
			return
		}
		res := s.runBulk(r, v, plan)
		out := done{Done: true, Message: fmt.Sprintf("%s: %d of %d previewed intents changed, %d refused.", verbTitle(plan.verb, ""), res.Changed, len(plan.items), len(res.Refused)),
			Changed: []string{}, Refused: []refusedJSON{}, Event: res.Event}
		for _, k := range res.ChangedKeys {
			out.Changed = append(out.Changed, k.String())
		}
		for _, f := range res.Refused {
			out.Refused = append(out.Refused, refusedJSON{f.Key.String(), f.Why, f.Moved})
		}
		s.reply(w, http.StatusOK, out)
		return
	}
	keys := r.PostForm["key"]
	if len(keys) == 0 && !lf.chooses() {
		problems = append(problems, "choose the intents: their keys (key), or a filter (state, reason, account, since, until, q)")
	}
	if len(problems) > 0 {
		s.refuse(w, r, http.StatusUnprocessableEntity, codeInvalid, "nothing was changed: "+strings.Join(problems, "; "))
		return
	}
	d, problems, err := s.bulkPreview(r, v, lf, keys, r.PostFormValue("verb"), strings.TrimSpace(r.PostFormValue("note")))
	switch {
	case err != nil:
		s.apiFail(w, r, err)
	case len(problems) > 0:
		s.refuse(w, r, http.StatusUnprocessableEntity, codeInvalid, "nothing was changed: "+strings.Join(problems, "; "))
	default:
		s.replyPreview(w, d)
	}
}

func (s *Server) apiRejects(w http.ResponseWriter, r *http.Request, _ visitor) {
	q := r.URL.Query()
	limit, ok := s.apiLimit(w, r, q, 200)
	if !ok {
		return
	}
	rows, err := s.l.Rejects(r.Context(), strings.TrimSpace(q.Get("reason")), limit)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	out := struct {
		Rejects []jsonview.Reject `json:"rejects"`
	}{make([]jsonview.Reject, len(rows))}
	for i, row := range rows {
		out.Rejects[i] = jsonview.RejectOf(row)
	}
	s.reply(w, http.StatusOK, out)
}

// replayTotals are a replay's counts by outcome.
type replayTotals struct {
	Created       int `json:"created"`
	AlreadyStored int `json:"already_stored"`
	Refused       int `json:"refused"`
	NotReplayable int `json:"not_replayable"`
	Skipped       int `json:"skipped"`
}

func totalsOf(t ingest.ReplayTotals) *replayTotals {
	return &replayTotals{t.Created, t.AlreadyStored, t.Refused, t.NotReplayable, t.Skipped}
}

// replayRowJSON is one reject of a replay's preview or result.
type replayRowJSON struct {
	Stream      string    `json:"stream"`
	StreamSeq   int64     `json:"stream_seq"`
	Reason      string    `json:"reason"`
	Subject     string    `json:"subject"`
	At          time.Time `json:"at"`
	Outcome     string    `json:"outcome"`
	Account     string    `json:"account"`
	DeliveryKey string    `json:"delivery_key,omitempty"`
	Now         string    `json:"now,omitempty"`
}

func replayRowOf(row replayRow) replayRowJSON {
	j := replayRowJSON{Stream: row.Stream, StreamSeq: row.Seq, Reason: row.Reason, Subject: ledger.StoredText(row.Subject), At: row.At,
		Outcome: strings.ReplaceAll(row.Outcome, " ", "_"), Account: row.Account, Now: row.Now}
	if row.Key != nil {
		j.DeliveryKey = row.Key.String()
	}
	return j
}

func (s *Server) apiReplay(w http.ResponseWriter, r *http.Request, v visitor) {
	f := readReplayForm(r.PostForm)
	if confirm := r.PostFormValue("confirm"); confirm != "" {
		plan := s.redeemReplay(v, confirm, f)
		if plan == nil {
			s.refuseConfirmationAPI(w, r)
			return
		}
		d := s.runReplay(r, v, plan)
		out := struct {
			Done    bool            `json:"done"`
			Message string          `json:"message"`
			Totals  *replayTotals   `json:"totals"`
			Rejects []replayRowJSON `json:"rejects"`
			Missing int             `json:"missing"`
			Event   string          `json:"event,omitempty"`
			Problem string          `json:"problem,omitempty"`
		}{Done: true, Message: d.Title, Totals: totalsOf(d.Totals), Rejects: []replayRowJSON{}, Missing: d.Missing, Event: d.Event, Problem: d.Problem}
		for _, row := range d.Rows {
			out.Rejects = append(out.Rejects, replayRowOf(row))
		}
		s.reply(w, http.StatusOK, out)
		return
	}
	d, status, problems, err := s.replayPreview(r, v, f, "")
	switch {
	case err != nil:
		s.apiFail(w, r, err)
	case status == http.StatusNotFound:
		s.refuse(w, r, status, codeNotFound, strings.Join(problems, "; "))
	case len(problems) > 0 && status == http.StatusOK:
		// Nothing to replay: a preview with nothing to confirm.
		s.replyPreview(w, confirmData{Title: "Replay: nothing matches", Effect: problems})
	case len(problems) > 0:
		s.refuse(w, r, http.StatusUnprocessableEntity, codeInvalid, "nothing was replayed: "+strings.Join(problems, "; "))
	default:
		s.replyPreview(w, d)
	}
}

func (s *Server) apiAccounts(w http.ResponseWriter, r *http.Request, _ visitor) {
	ctx := r.Context()
	accounts, err := s.l.Accounts(ctx)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	sort.Slice(accounts, func(i, j int) bool { return accounts[i].ID < accounts[j].ID })
	ids := make([]string, len(accounts))
	for i, a := range accounts {
		ids[i] = a.ID
	}
	healths, err := s.l.AccountHealth(ctx, ids...)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	health := map[string]ledger.Health{}
	for _, h := range healths {
		health[h.Account] = h
	}
	holds, err := s.l.Holds(ctx, nil)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	type accountJSON struct {
		jsonview.Account
		Health jsonview.Health `json:"health"`
		// Held says what holds the account now, as the overview says it; null when it is served.
		Held *string `json:"held"`
	}
	out := struct {
		Accounts []accountJSON `json:"accounts"`
	}{make([]accountJSON, len(accounts))}
	for i, a := range accounts {
		out.Accounts[i] = accountJSON{Account: jsonview.AccountOf(a), Health: jsonview.HealthOf(health[a.ID])}
		if h, ok := holds[a.ID]; ok {
			text := holdText(h)
			out.Accounts[i].Held = &text
		}
	}
	s.reply(w, http.StatusOK, out)
}

func (s *Server) apiSwitches(w http.ResponseWriter, r *http.Request, _ visitor) {
	accounts, err := s.accountIDs(r)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	switches, err := s.l.Switches(r.Context())
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	byScope := map[string]ledger.Switch{}
	for _, sw := range switches {
		byScope[sw.Scope] = sw
	}
	out := struct {
		Switches []jsonview.Switch `json:"switches"`
	}{}
	for _, scope := range append([]string{ledger.GlobalScope}, accounts...) {
		sw, set := byScope[scope]
		j := jsonview.Switch{Scope: scope}
		if set {
			j = jsonview.SwitchOf(sw)
		}
		out.Switches = append(out.Switches, j)
	}
	s.reply(w, http.StatusOK, out)
}

func (s *Server) apiSwitch(w http.ResponseWriter, r *http.Request, v visitor) {
	f := switchFormOf(r.PostForm)
	if problem := f.problem(); problem != "" {
		s.refuse(w, r, http.StatusUnprocessableEntity, codeInvalid, "nothing was changed: "+problem)
		return
	}
	confirm := r.PostFormValue("confirm")
	if confirm == "" {
		s.replyPreview(w, s.switchPreview(v, f))
		return
	}
	if _, ok := s.redeem(v, confirm, f.digest()); !ok {
		s.refuseConfirmationAPI(w, r)
		return
	}
	if msg, refused := s.setSwitch(r, v, f); refused {
		s.refuse(w, r, http.StatusUnprocessableEntity, codeRefused, "refused, nothing was changed: "+msg)
	} else {
		s.replyDone(w, msg)
	}
}

// policyJSON is a policy row: each field as the policy form takes it ("5", "30s", "2",
// "none", a list of reasons), null where the account inherits the default's.
type policyJSON struct {
	Scope     string             `json:"scope"`
	Fields    map[string]*string `json:"fields"`
	UpdatedBy string             `json:"updated_by"`
	UpdatedAt time.Time          `json:"updated_at"`
}

func (s *Server) apiPolicies(w http.ResponseWriter, r *http.Request, _ visitor) {
	rows, err := s.l.Policies(r.Context())
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	out := struct {
		Policies []policyJSON `json:"policies"`
	}{[]policyJSON{}}
	for _, row := range rows {
		pv := viewOf(row)
		j := policyJSON{Scope: pv.Scope, Fields: map[string]*string{}, UpdatedBy: pv.UpdatedBy, UpdatedAt: pv.UpdatedAt}
		for _, f := range pv.Fields {
			j.Fields[string(f.Name)] = nil
			if f.Set {
				value := f.Value
				j.Fields[string(f.Name)] = &value
			}
		}
		out.Policies = append(out.Policies, j)
	}
	s.reply(w, http.StatusOK, out)
}

func (s *Server) apiPolicy(w http.ResponseWriter, r *http.Request, v visitor) {
	c, err := readPolicyChange(r.PostForm)
	if err != nil {
		s.refuse(w, r, http.StatusUnprocessableEntity, codeInvalid, "nothing was changed: "+err.Error())
		return
	}
	confirm := r.PostFormValue("confirm")
	if confirm == "" {
		d, err := s.policyPreview(r, v, c)
		if errors.Is(err, ledger.ErrUnknownAccount) {
			s.refuse(w, r, http.StatusUnprocessableEntity, codeRefused, "nothing was changed: "+err.Error())
			return
		}
		if err != nil {
			s.apiFail(w, r, err)
			return
		}
		s.replyPreview(w, d)
		return
	}
	if _, ok := s.redeem(v, confirm, c.digest()); !ok {
		s.refuseConfirmationAPI(w, r)
		return
	}
	if msg, refused := s.setPolicy(r, v, c); refused {
		s.refuse(w, r, http.StatusUnprocessableEntity, codeRefused, "refused, nothing was changed: "+msg)
	} else {
		s.replyDone(w, msg)
	}
}

func (s *Server) apiControlHistory(w http.ResponseWriter, r *http.Request, _ visitor) {
	q := r.URL.Query()
	limit, ok := s.apiLimit(w, r, q, 50)
	if !ok {
		return
	}
	kind := strings.TrimSpace(q.Get("kind"))
	if kind != "" && !slices.Contains(ledger.ControlKinds(), kind) {
		s.refuse(w, r, http.StatusUnprocessableEntity, codeInvalid, fmt.Sprintf("kind %q is not a kind of control (%s)", kind, strings.Join(ledger.ControlKinds(), ", ")))
		return
	}
	rows, err := s.l.ControlHistory(r.Context(), kind, limit)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	if rows == nil {
		rows = []ledger.ControlChange{}
	}
	s.reply(w, http.StatusOK, struct {
		History []ledger.ControlChange `json:"history"`
	}{rows})
}

// apiLimit reads a list's limit parameter: def when absent, else a whole number from 1 to 1000.
// A bad one is refused (422) and ok is false.
func (s *Server) apiLimit(w http.ResponseWriter, r *http.Request, q url.Values, def int) (limit int, ok bool) {
	raw := q.Get("limit")
	if raw == "" {
		return def, true
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > 1000 {
		s.refuse(w, r, http.StatusUnprocessableEntity, codeInvalid, "limit: give a whole number from 1 to 1000")
		return 0, false
	}
	return n, true
}
