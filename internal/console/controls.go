package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/atmost/atmost/pkg/ledger"
)

// switchRow is one kill switch as the controls page shows it; Set is false for one never set.
type switchRow struct {
	Scope string
	ledger.Switch
	Set bool
}

// policyView is one policy row's fields as text, "" where the account inherits.
type policyView struct {
	Scope     string
	Fields    []policyFieldView
	UpdatedBy string
	UpdatedAt time.Time
}

type policyFieldView struct {
	Name  ledger.PolicyField
	Value string
	Set   bool
}

type controlsData struct {
	Switches []switchRow
	Default  policyView
	Policies []policyView
	Accounts []string
	Epoch    ledger.EpochStart
	History  []ledger.ControlChange
	Fields   []ledger.PolicyField
	Failed   []ledger.Reason // the reasons a policy governs
	Always   []ledger.Reason // the reasons retried always, which no policy governs
	// Form is the policy form as last posted, kept when it is refused; Problems says why.
	Form     policyForm
	Problems []string
}

// policyForm is the policy form's fields as the person typed them.
type policyForm struct {
	Scope, Note string
	Values      map[string]string
	Inherit     map[string]bool
}

func policyFormOf(r *http.Request) policyForm {
	f := policyForm{Scope: strings.TrimSpace(r.PostFormValue("scope")), Note: strings.TrimSpace(r.PostFormValue("note")),
		Values: map[string]string{}, Inherit: map[string]bool{}}
	for _, name := range ledger.PolicyFields() {
		f.Values[string(name)] = strings.TrimSpace(r.PostFormValue(string(name)))
		f.Inherit[string(name)] = r.PostFormValue("inherit_"+string(name)) == "on"
	}
	return f
}

func fieldValue(o ledger.PolicyOverride, f ledger.PolicyField) (string, bool) {
	i := func(v *int) (string, bool) {
		if v == nil {
			return "", false
		}
		return strconv.Itoa(*v), true
	}
	d := func(v *time.Duration) (string, bool) {
		if v == nil {
			return "", false
		}
		return v.String(), true
	}
	switch f {
	case ledger.FieldAttemptCap:
		return i(o.AttemptCap)
	case ledger.FieldBackoffBase:
		return d(o.BackoffBase)
	case ledger.FieldBackoffMax:
		return d(o.BackoffMax)
	case ledger.FieldRatePerMinute:
		return i(o.RatePerMinute)
	case ledger.FieldRateBurst:
		return i(o.RateBurst)
	case ledger.FieldTextWindow:
		return d(o.TextWindow)
	case ledger.FieldBackoffFactor:
		if o.BackoffFactor == nil {
			return "", false
		}
		return strconv.FormatFloat(*o.BackoffFactor, 'g', -1, 64), true
	case ledger.FieldTripFailures:
		return i(o.TripFailures)
	case ledger.FieldTripUnknowns:
		return i(o.TripUnknowns)
	case ledger.FieldTripWindow:
		return d(o.TripWindow)
	case ledger.FieldProbeBase:
		return d(o.ProbeBase)
	case ledger.FieldProbeMax:
		return d(o.ProbeMax)
	case ledger.FieldRetryableReasons:
		if o.RetryableReasons == nil {
			return "", false
		}
		if len(o.RetryableReasons) == 0 {
			return "none", true
		}
		names := make([]string, len(o.RetryableReasons))
		for i, r := range o.RetryableReasons {
			names[i] = string(r)
		}
		return strings.Join(names, ","), true
	}
	return "", false
}

func viewOf(row ledger.PolicyRow) policyView {
	pv := policyView{Scope: row.Scope, UpdatedBy: row.UpdatedBy, UpdatedAt: row.UpdatedAt}
	for _, f := range ledger.PolicyFields() {
		v, set := fieldValue(row.PolicyOverride, f)
		pv.Fields = append(pv.Fields, policyFieldView{f, v, set})
	}
	return pv
}

func (s *Server) controls(w http.ResponseWriter, r *http.Request, v visitor) {
	s.renderControls(w, r, v, policyForm{}, nil, http.StatusOK)
}

// renderControls shows the controls, with the policy form as form fills it and the problems of
// its last post.
func (s *Server) renderControls(w http.ResponseWriter, r *http.Request, v visitor, form policyForm, problems []string, status int) {
	ctx := r.Context()
	d := controlsData{Form: form, Problems: problems}
	var err error
	if d.Accounts, err = s.accountIDs(r); err != nil {
		s.fail(w, err)
		return
	}
	switches, err := s.l.Switches(ctx)
	if err != nil {
		s.fail(w, err)
		return
	}
	byScope := map[string]ledger.Switch{}
	for _, sw := range switches {
		byScope[sw.Scope] = sw
	}
	for _, scope := range append([]string{ledger.GlobalScope}, d.Accounts...) {
		sw, set := byScope[scope]
		d.Switches = append(d.Switches, switchRow{Scope: scope, Switch: sw, Set: set})
	}
	rows, err := s.l.Policies(ctx)
	if err != nil {
		s.fail(w, err)
		return
	}
	for _, row := range rows {
		if row.Scope == ledger.GlobalScope {
			d.Default = viewOf(row)
		} else {
			d.Policies = append(d.Policies, viewOf(row))
		}
	}
	if d.Epoch, err = s.l.CurrentEpoch(ctx); err != nil {
		s.fail(w, err)
		return
	}
	if d.History, err = s.l.ControlHistory(ctx, "", 50); err != nil {
		s.fail(w, err)
		return
	}
	d.Fields, d.Failed, d.Always = ledger.PolicyFields(), ledger.GovernedReasons(), alwaysRetried()
	s.render(w, status, "controls", v, d)
}

func scopeName(kind, scope string) string {
	if scope == ledger.GlobalScope {
		if kind == "switch" {
			return "the global switch"
		}
		return "the default policy"
	}
	if kind == "switch" {
		return "the switch of " + scope
	}
	return "the policy of " + scope
}

// switchForm is a kill switch change as the controls' form, or the API's body, carries it:
// its scope (GlobalScope or an account), on or off, and why.
type switchForm struct {
	scope, engaged, note string
}

func switchFormOf(form url.Values) switchForm {
	return switchForm{scope: strings.TrimSpace(form.Get("scope")), engaged: form.Get("engaged"), note: strings.TrimSpace(form.Get("note"))}
}

func (f switchForm) problem() string {
	if f.engaged != "on" && f.engaged != "off" || f.note == "" {
		return "choose on or off and say why; it is written to the control history with your name"
	}
	return ""
}

// digest binds a confirmation to exactly this change.
func (f switchForm) digest() string { return digest("switch", f.scope, f.engaged, f.note) }

func (s *Server) switchPreview(v visitor, f switchForm) confirmData {
	effect := []string{fmt.Sprintf("Turn %s %s.", scopeName("switch", f.scope), f.engaged)}
	if f.engaged == "on" {
		effect = append(effect, "Every new authorization in its scope stops from the next one on; work already authorized is not recalled, and waiting work opens no attempt until it is off.")
	} else {
		effect = append(effect, "Waiting work in its scope goes on (unless another switch that covers it is on).")
	}
	effect = append(effect, fmt.Sprintf("Recorded in the control history as %s: %q.", v.actor(), f.note))
	return confirmData{Title: "Kill switch", Effect: effect, Action: "/controls/switch",
		Fields: map[string]string{"scope": f.scope, "engaged": f.engaged, "note": f.note}, Confirm: s.issue(v, f.digest(), nil), Back: "/controls"}
}

// setSwitch makes a confirmed switch change through the ledger: what it did, or why the
// ledger refused it (refused true: nothing was changed).
func (s *Server) setSwitch(r *http.Request, v visitor, f switchForm) (msg string, refused bool) {
	onOff := map[bool]string{true: "on", false: "off"}
	ch, err := s.l.SetSwitch(r.Context(), f.scope, f.engaged == "on", ledger.Actor{Name: v.actor(), Reason: f.note})
	if err != nil {
		s.audit(r, v, "switch "+f.engaged, scopeName("switch", f.scope), "refused: "+err.Error())
		return err.Error(), true
	}
	s.audit(r, v, "switch "+f.engaged, scopeName("switch", f.scope), "done")
	before := "off (never set)"
	if ch.Before != nil {
		before = onOff[ch.Before.Engaged]
	}
	return fmt.Sprintf("%s: %s → %s, by %s.", scopeName("switch", f.scope), before, onOff[ch.After.Engaged], v.actor()), false
}

func (s *Server) switchAct(w http.ResponseWriter, r *http.Request, v visitor) {
	f := switchFormOf(r.PostForm)
	back := "/controls"
	if problem := f.problem(); problem != "" {
		s.flash(v, "Nothing was changed: "+problem+".")
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	if confirm := r.PostFormValue("confirm"); confirm != "" {
		if _, ok := s.redeem(v, confirm, f.digest()); !ok {
			s.refuseConfirmation(w, v, back)
			return
		}
		msg, refused := s.setSwitch(r, v, f)
		if refused {
			msg = "Refused, nothing was changed: " + msg
		}
		s.flash(v, msg)
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	s.render(w, http.StatusOK, "confirm", v, s.switchPreview(v, f))
}

// policyEdit reads a policy form: a blank field keeps its value, "inherit" (accounts only)
// clears the account's override.
func policyEdit(form url.Values) (ledger.PolicyEdit, []string, error) {
	var edit ledger.PolicyEdit
	var parts []string
	for _, f := range ledger.PolicyFields() {
		raw := strings.TrimSpace(form.Get(string(f)))
		if form.Get("inherit_"+string(f)) == "on" {
			if raw != "" {
				return edit, nil, fmt.Errorf("%s is both set and inherited: give one", f)
			}
			edit.Inherit = append(edit.Inherit, f)
			parts = append(parts, string(f)+"=inherit")
			continue
		}
		if raw == "" {
			continue
		}
		parts = append(parts, string(f)+"="+raw)
		var err error
		switch f {
		case ledger.FieldAttemptCap, ledger.FieldRatePerMinute, ledger.FieldRateBurst, ledger.FieldTripFailures, ledger.FieldTripUnknowns:
			n, e := strconv.Atoi(raw)
			if e != nil {
				err = fmt.Errorf("%s: give a whole number, such as %s (you gave %q)", f, wholeExample[f], raw)
			} else {
				switch f {
				case ledger.FieldAttemptCap:
					edit.Set.AttemptCap = &n
				case ledger.FieldRatePerMinute:
					edit.Set.RatePerMinute = &n
				case ledger.FieldTripFailures:
					edit.Set.TripFailures = &n
				case ledger.FieldTripUnknowns:
					edit.Set.TripUnknowns = &n
				default:
					edit.Set.RateBurst = &n
				}
			}
		case ledger.FieldBackoffBase, ledger.FieldBackoffMax, ledger.FieldTextWindow, ledger.FieldTripWindow, ledger.FieldProbeBase, ledger.FieldProbeMax:
			d, e := time.ParseDuration(raw)
			if e != nil {
				err = fmt.Errorf("%s: give a duration, such as 500ms, 5s or 10m (you gave %q)", f, raw)
			} else {
				switch f {
				case ledger.FieldBackoffBase:
					edit.Set.BackoffBase = &d
				case ledger.FieldBackoffMax:
					edit.Set.BackoffMax = &d
				case ledger.FieldTripWindow:
					edit.Set.TripWindow = &d
				case ledger.FieldProbeBase:
					edit.Set.ProbeBase = &d
				case ledger.FieldProbeMax:
					edit.Set.ProbeMax = &d
				default:
					edit.Set.TextWindow = &d
				}
			}
		case ledger.FieldBackoffFactor:
			x, e := strconv.ParseFloat(raw, 64)
			if e != nil {
				err = fmt.Errorf("%s: give a number, such as 2 or 1.5 (you gave %q)", f, raw)
			} else {
				edit.Set.BackoffFactor = &x
			}
		case ledger.FieldRetryableReasons:
			edit.Set.RetryableReasons = []ledger.Reason{}
			if raw != "none" {
				for _, name := range strings.Split(raw, ",") {
					if rr := ledger.Reason(strings.TrimSpace(name)); rr != "" && !slices.Contains(edit.Set.RetryableReasons, rr) {
						edit.Set.RetryableReasons = append(edit.Set.RetryableReasons, rr)
					}
				}
			}
		}
		if err != nil {
			return edit, nil, err
		}
	}
	return edit, parts, nil
}

// policyChange is a policy change as the controls' form, or the API's body, carries it, read
// and checked (readPolicyChange): its scope, why, the edit, and the edit's fields as typed.
type policyChange struct {
	scope, note string
	edit        ledger.PolicyEdit
	parts       []string
	form        url.Values
}

// readPolicyChange reads and checks the policy change form names; the error says what is
// wrong with it in the operator's words.
func readPolicyChange(form url.Values) (policyChange, error) {
	c := policyChange{scope: strings.TrimSpace(form.Get("scope")), note: strings.TrimSpace(form.Get("note")), form: form}
	var err error
	c.edit, c.parts, err = policyEdit(form)
	if err == nil && len(c.parts) == 0 {
		err = fmt.Errorf("nothing to change: fill in a field, or tick inherit")
	}
	if err == nil {
		err = c.edit.Check(c.scope)
	}
	if err == nil && c.note == "" {
		err = fmt.Errorf("say why: it is written to the control history with your name")
	}
	return c, err
}

// digest binds a confirmation to exactly this change.
func (c policyChange) digest() string {
	return digest(append([]string{"policy", c.scope, c.note}, c.parts...)...)
}

// policyPreview previews c: each field before and after, and the confirmation.
func (s *Server) policyPreview(r *http.Request, v visitor, c policyChange) (confirmData, error) {
	layers, err := s.l.PolicyLayersFor(r.Context(), c.scope)
	if err != nil {
		return confirmData{}, err
	}
	before := layers.Default.PolicyOverride
	if c.scope != ledger.GlobalScope {
		before = ledger.PolicyOverride{}
		if layers.Override != nil {
			before = layers.Override.PolicyOverride
		}
	}
	effect := []string{"Change " + scopeName("policy", c.scope) + ":"}
	for _, f := range ledger.PolicyFields() {
		b, bSet := fieldValue(before, f)
		a, aSet := fieldValue(c.edit.Set, f)
		switch {
		case slices.Contains(c.edit.Inherit, f):
			effect = append(effect, fmt.Sprintf("%s: %s → inherit the default", f, orInherit(b, bSet)))
		case aSet && (a != b || !bSet):
			effect = append(effect, fmt.Sprintf("%s: %s → %s", f, orInherit(b, bSet), a))
		}
	}
	effect = append(effect, "Fields not named keep their value as it stands when the change is made.",
		fmt.Sprintf("Recorded in the control history as %s: %q.", v.actor(), c.note))
	fields := map[string]string{"scope": c.scope, "note": c.note}
	for _, f := range ledger.PolicyFields() {
		if raw := strings.TrimSpace(c.form.Get(string(f))); raw != "" {
			fields[string(f)] = raw
		}
		if c.form.Get("inherit_"+string(f)) == "on" {
			fields["inherit_"+string(f)] = "on"
		}
	}
	return confirmData{Title: "Policy", Effect: effect, Action: "/controls/policy", Fields: fields, Confirm: s.issue(v, c.digest(), nil), Back: "/controls"}, nil
}

// setPolicy makes a confirmed policy change through the ledger: what it did, or why the
// ledger refused it (refused true: nothing was changed).
func (s *Server) setPolicy(r *http.Request, v visitor, c policyChange) (msg string, refused bool) {
	ch, err := s.l.SetPolicy(r.Context(), c.scope, c.edit, ledger.Actor{Name: v.actor(), Reason: c.note})
	if err != nil {
		s.audit(r, v, "policy "+strings.Join(c.parts, " "), scopeName("policy", c.scope), "refused: "+err.Error())
		return err.Error(), true
	}
	s.audit(r, v, "policy "+strings.Join(c.parts, " "), scopeName("policy", c.scope), "done")
	return fmt.Sprintf("%s changed by %s: %s.", scopeName("policy", c.scope), v.actor(), strings.Join(changedFields(ch), "; ")), false
}

func (s *Server) policyAct(w http.ResponseWriter, r *http.Request, v visitor) {
	back := "/controls"
	c, err := readPolicyChange(r.PostForm)
	if err != nil {
		// The controls again, the form as it was typed: the person corrects one field.
		s.renderControls(w, r, v, policyFormOf(r), []string{"Nothing was changed: " + err.Error() + "."}, http.StatusUnprocessableEntity)
		return
	}
	if confirm := r.PostFormValue("confirm"); confirm != "" {
		if _, ok := s.redeem(v, confirm, c.digest()); !ok {
			s.refuseConfirmation(w, v, back)
			return
		}
		msg, refused := s.setPolicy(r, v, c)
		if refused {
			msg = "Refused, nothing was changed: " + msg
		}
		s.flash(v, msg)
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	d, err := s.policyPreview(r, v, c)
	if errors.Is(err, ledger.ErrUnknownAccount) {
		s.renderControls(w, r, v, policyFormOf(r), []string{"Nothing was changed: " + err.Error() + "."}, http.StatusUnprocessableEntity)
		return
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, http.StatusOK, "confirm", v, d)
}

// wholeExample is a value each whole-number field takes, for the form's problems.
var wholeExample = map[ledger.PolicyField]string{ledger.FieldAttemptCap: "5", ledger.FieldRatePerMinute: "60", ledger.FieldRateBurst: "10",
	ledger.FieldTripFailures: "3", ledger.FieldTripUnknowns: "10"}

func orInherit(v string, set bool) string {
	if !set {
		return "inherit"
	}
	return v
}

func changedFields(ch ledger.PolicyChange) []string {
	var before ledger.PolicyOverride
	if ch.Before != nil {
		before = *ch.Before
	}
	var out []string
	for _, f := range ledger.PolicyFields() {
		b, bSet := fieldValue(before, f)
		a, aSet := fieldValue(ch.After, f)
		if b != a || bSet != aSet {
			out = append(out, fmt.Sprintf("%s %s → %s", f, orInherit(b, bSet), orInherit(a, aSet)))
		}
	}
	if len(out) == 0 {
		out = []string{"no field changed"}
	}
	return out
}

// alwaysRetried lists the failed-state reasons retried whatever the policy says.
func alwaysRetried() []ledger.Reason {
	var out []ledger.Reason
	for _, r := range ledger.FailedReasons() {
		if rule, _ := r.Rule(); rule.Retry == ledger.RetryYes {
			out = append(out, r)
		}
	}
	return out
}
