package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/atmost/atmost/pkg/ledger"
)

// policyField is one field of a policy as the policy commands show it, named by its flag.
type policyField struct {
	field ledger.PolicyField
	flag  string
	show  func(o ledger.PolicyOverride) (string, bool) // the value, and whether it is set
}

func showInt(v *int) (string, bool) {
	if v == nil {
		return "", false
	}
	return strconv.Itoa(*v), true
}

func showDuration(v *time.Duration) (string, bool) {
	if v == nil {
		return "", false
	}
	return v.String(), true
}

var policyFields = []policyField{
	{ledger.FieldAttemptCap, "attempt-cap", func(o ledger.PolicyOverride) (string, bool) { return showInt(o.AttemptCap) }},
	{ledger.FieldBackoffBase, "backoff-base", func(o ledger.PolicyOverride) (string, bool) { return showDuration(o.BackoffBase) }},
	{ledger.FieldBackoffMax, "backoff-max", func(o ledger.PolicyOverride) (string, bool) { return showDuration(o.BackoffMax) }},
	{ledger.FieldBackoffFactor, "backoff-factor", func(o ledger.PolicyOverride) (string, bool) {
		if o.BackoffFactor == nil {
			return "", false
		}
		return strconv.FormatFloat(*o.BackoffFactor, 'g', -1, 64), true
	}},
	{ledger.FieldRatePerMinute, "rate-per-minute", func(o ledger.PolicyOverride) (string, bool) {
		if o.RatePerMinute != nil && *o.RatePerMinute == 0 {
			return "0 (unlimited)", true
		}
		return showInt(o.RatePerMinute)
	}},
	{ledger.FieldRateBurst, "rate-burst", func(o ledger.PolicyOverride) (string, bool) { return showInt(o.RateBurst) }},
	{ledger.FieldTextWindow, "text-window", func(o ledger.PolicyOverride) (string, bool) { return showDuration(o.TextWindow) }},
	{ledger.FieldRetryableReasons, "retryable", func(o ledger.PolicyOverride) (string, bool) {
		switch {
		case o.RetryableReasons == nil:
			return "", false
		case len(o.RetryableReasons) == 0:
			return "none", true
		}
		names := make([]string, len(o.RetryableReasons))
		for i, r := range o.RetryableReasons {
			names[i] = string(r)
		}
		return strings.Join(names, ","), true
	}},
	{ledger.FieldTripFailures, "trip-failures", func(o ledger.PolicyOverride) (string, bool) { return showInt(o.TripFailures) }},
	{ledger.FieldTripUnknowns, "trip-unknowns", func(o ledger.PolicyOverride) (string, bool) { return showInt(o.TripUnknowns) }},
	{ledger.FieldTripWindow, "trip-window", func(o ledger.PolicyOverride) (string, bool) { return showDuration(o.TripWindow) }},
	{ledger.FieldProbeBase, "probe-base", func(o ledger.PolicyOverride) (string, bool) { return showDuration(o.ProbeBase) }},
	{ledger.FieldProbeMax, "probe-max", func(o ledger.PolicyOverride) (string, bool) { return showDuration(o.ProbeMax) }},
}

// fieldNamed finds a policy field by its flag name or its ledger name.
func fieldNamed(name string) (policyField, bool) {
	name = strings.TrimSpace(name)
	for _, f := range policyFields {
		if name == f.flag || name == string(f.field) || strings.ReplaceAll(name, "_", "-") == f.flag {
			return f, true
		}
	}
	return policyField{}, false
}

func fieldFlags() string {
	names := make([]string, len(policyFields))
	for i, f := range policyFields {
		names[i] = f.flag
	}
	return strings.Join(names, ", ")
}

// full is a policy in force as a row that sets every field.
func full(p ledger.Policy) ledger.PolicyOverride {
	reasons := p.RetryableReasons
	if reasons == nil {
		reasons = []ledger.Reason{}
	}
	return ledger.PolicyOverride{
		AttemptCap: &p.AttemptCap, BackoffBase: &p.BackoffBase, BackoffMax: &p.BackoffMax,
		RatePerMinute: &p.RatePerMinute, RateBurst: &p.RateBurst, TextWindow: &p.TextWindow,
		RetryableReasons: reasons, BackoffFactor: &p.BackoffFactor, TripFailures: &p.TripFailures,
		TripUnknowns: &p.TripUnknowns, TripWindow: &p.TripWindow, ProbeBase: &p.ProbeBase, ProbeMax: &p.ProbeMax,
	}
}

// policyJSON is a policy row as the policy commands print it, in the control history's units;
// null fields inherit the default.
type policyJSON struct {
	AttemptCap        *int     `json:"attempt_cap"`
	BackoffBaseMs     *int64   `json:"backoff_base_ms"`
	BackoffMaxMs      *int64   `json:"backoff_max_ms"`
	RatePerMinute     *int     `json:"rate_per_minute"`
	RateBurst         *int     `json:"rate_burst"`
	TextWindowSeconds *int64   `json:"text_window_seconds"`
	RetryableReasons  []string `json:"retryable_reasons"`
	BackoffFactor     *float64 `json:"backoff_factor"`
	TripFailures      *int     `json:"trip_failures"`
	TripUnknowns      *int     `json:"trip_unknowns"`
	TripWindowSeconds *int64   `json:"trip_window_seconds"`
	ProbeBaseMs       *int64   `json:"probe_base_ms"`
	ProbeMaxMs        *int64   `json:"probe_max_ms"`
}

func toPolicyJSON(o ledger.PolicyOverride) policyJSON {
	in := func(v *time.Duration, unit time.Duration) *int64 {
		if v == nil {
			return nil
		}
		n := int64(*v / unit)
		return &n
	}
	j := policyJSON{
		AttemptCap: o.AttemptCap, BackoffBaseMs: in(o.BackoffBase, time.Millisecond), BackoffMaxMs: in(o.BackoffMax, time.Millisecond),
		RatePerMinute: o.RatePerMinute, RateBurst: o.RateBurst, TextWindowSeconds: in(o.TextWindow, time.Second),
		BackoffFactor: o.BackoffFactor, TripFailures: o.TripFailures, TripUnknowns: o.TripUnknowns,
		TripWindowSeconds: in(o.TripWindow, time.Second), ProbeBaseMs: in(o.ProbeBase, time.Millisecond), ProbeMaxMs: in(o.ProbeMax, time.Millisecond),
	}
	if o.RetryableReasons != nil {
		j.RetryableReasons = make([]string, len(o.RetryableReasons))
		for i, r := range o.RetryableReasons {
			j.RetryableReasons[i] = string(r)
		}
	}
	return j
}

// policyFlags are policy set's field flags.
type policyFlags struct {
	attemptCap, ratePerMinute, rateBurst, tripFailures, tripUnknowns     int
	backoffBase, backoffMax, textWindow, tripWindow, probeBase, probeMax time.Duration
	backoffFactor                                                        float64
	retryable, inherit, account                                          string
	inheritRetryable                                                     bool
}

func policyCommand() *Command {
	var get, set policyFlags
	return &Command{Name: "policy", Summary: "policy get, policy set: attempt caps, backoff, rate limits, retryable reasons",
		About: `Without --account, the default policy, which every account inherits; with --account, that
account's overrides. get shows the policy in force and where each field comes from. set changes
only the fields it is given and keeps the others; --inherit clears an account's override of
the named fields (attempt-cap, backoff-base, backoff-max, backoff-factor, rate-per-minute,
rate-burst, text-window, retryable, trip-failures, trip-unknowns, trip-window, probe-base,
probe-max), so the account follows the default again. The default policy always
sets every field. Durations are Go durations (500ms, 5s, 10m, 24h); a rate of 0 a minute is
unlimited. Only reasons of the failed state can be retried by policy, and of them
account_disabled and credential_refused are retried always (their intents wait until the account
is enabled, or serves again), so --retryable governs the others and refuses them. Every change is written to
the control history (atmost controls log) with the operator.`,
		Subs: []*Command{
			{Name: "get", Summary: "the policy in force, and which fields an account overrides",
				Flags: func(f *Flags) {
					f.String(&get.account, "account", "A", "", "the account's policy (default: the default policy)")
					f.Ledger("the ledger database")
					f.JSON("print JSON instead of a table")
				},
				Run: func(ctx context.Context, c *line) int {
					scope, code := c.account(get.account)
					if code != ExitOK {
						return code
					}
					return getPolicy(ctx, c, scope)
				}},
			{Name: "set", Summary: "change the given fields of the default policy or an account's",
				Flags: func(f *Flags) {
					p := &set
					f.String(&p.account, "account", "A", "", "the account's policy (default: the default policy)")
					f.Reason("why, written to the control history")
					f.Operator()
					f.Int(&p.attemptCap, "attempt-cap", "N", 0, "attempts that may reach authorization before an intent is parked (>= 1)")
					f.Duration(&p.backoffBase, "backoff-base", "D", 0, "the first retry's delay, multiplied by the backoff factor on every retry (whole milliseconds)")
					f.Duration(&p.backoffMax, "backoff-max", "D", 0, "the longest retry delay (whole milliseconds)")
					f.Float64(&p.backoffFactor, "backoff-factor", "X", 0, fmt.Sprintf("what each retry multiplies the delay by, and each failed probe a holding account's wait (%g to %g; 1: constant)", ledger.MinBackoffFactor, ledger.MaxBackoffFactor))
					f.Int(&p.ratePerMinute, "rate-per-minute", "N", 0, "authorizations a minute per account (0: unlimited)")
					f.Int(&p.rateBurst, "rate-burst", "N", 0, "authorizations at once at most (>= 1)")
					f.Duration(&p.textWindow, "text-window", "D", 0, "the duplicate-text window (whole seconds)")
					f.Int(&p.tripFailures, "trip-failures", "N", 0, "consecutive failures saying the platform cannot take anything now that hold the account (>= 1)")
					f.Int(&p.tripUnknowns, "trip-unknowns", "N", 0, "more unknown outcomes than this within the trip window hold the account (>= 0)")
					f.Duration(&p.tripWindow, "trip-window", "D", 0, "the window unknown outcomes are counted in (whole seconds, >= 1s)")
					f.Duration(&p.probeBase, "probe-base", "D", 0, "a holding account's wait before its first probe (whole milliseconds, >= 1ms)")
					f.Duration(&p.probeMax, "probe-max", "D", 0, "a holding account's longest wait between probes (whole milliseconds, >= 1ms)")
					f.String(&p.retryable, "retryable", "r1,r2|none", "", "the failed-state reasons retried automatically, comma-separated, or none")
					f.Bool(&p.inheritRetryable, "inherit-retryable", "the account retries what the default retries (same as --inherit retryable)")
					f.String(&p.inherit, "inherit", "FIELD,...", "", "fields the account inherits from the default again, comma-separated ("+fieldFlags()+")")
					f.Ledger("the ledger database")
					f.JSON("print the change as JSON")
				},
				Run: func(ctx context.Context, c *line) int { return setPolicy(ctx, c, set) }},
		},
	}
}

func setPolicy(ctx context.Context, c *line, p policyFlags) int {
	io := c.io
	scope, code := c.account(p.account)
	if code != ExitOK {
		return code
	}
	edit, code := policyEdit(c, scope, p)
	if code != ExitOK {
		return code
	}
	operator, reason, code := c.change()
	if code != ExitOK {
		return code
	}
	l, closeLedger, err := openLedger(ctx, c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	ch, err := l.SetPolicy(ctx, scope, edit, ledger.Actor{Name: operator, Reason: reason})
	if err != nil {
		return c.fail(err)
	}
	if c.asJSON {
		out := struct {
			Scope  string      `json:"scope"`
			Before *policyJSON `json:"before"`
			After  policyJSON  `json:"after"`
			Actor  string      `json:"actor"`
			Reason string      `json:"reason"`
		}{Scope: scope, After: toPolicyJSON(ch.After), Actor: operator, Reason: reason}
		if ch.Before != nil {
			b := toPolicyJSON(*ch.Before)
			out.Before = &b
		}
		return writeJSON(io, out)
	}
	var before ledger.PolicyOverride
	if ch.Before != nil {
		before = *ch.Before
	}
	fmt.Fprintf(io.Stdout, "%s policy (by %s: %s):\n", scopeName("policy", scope), operator, reason)
	changed := false
	for _, f := range policyFields {
		b, bSet := f.show(before)
		a, aSet := f.show(ch.After)
		if b == a && bSet == aSet {
			continue
		}
		changed = true
		fmt.Fprintf(io.Stdout, "  %s: %s -> %s\n", f.flag, orInherit(b, bSet), orInherit(a, aSet))
	}
	if !changed {
		fmt.Fprintln(io.Stdout, "  no field changed")
	}
	return ExitOK
}

func orInherit(v string, set bool) string {
	if !set {
		return "inherit"
	}
	return v
}

// policyEdit builds the edit policy set's flags ask for, or returns the exit code of a usage
// error: nothing to change, a reason that cannot be retried, a value out of range.
func policyEdit(c *line, scope string, p policyFlags) (ledger.PolicyEdit, int) {
	var edit ledger.PolicyEdit
	given := c.given
	if given("attempt-cap") {
		edit.Set.AttemptCap = &p.attemptCap
	}
	if given("backoff-base") {
		edit.Set.BackoffBase = &p.backoffBase
	}
	if given("backoff-max") {
		edit.Set.BackoffMax = &p.backoffMax
	}
	if given("rate-per-minute") {
		edit.Set.RatePerMinute = &p.ratePerMinute
	}
	if given("rate-burst") {
		edit.Set.RateBurst = &p.rateBurst
	}
	if given("text-window") {
		edit.Set.TextWindow = &p.textWindow
	}
	if given("backoff-factor") {
		edit.Set.BackoffFactor = &p.backoffFactor
	}
	if given("trip-failures") {
		edit.Set.TripFailures = &p.tripFailures
	}
	if given("trip-unknowns") {
		edit.Set.TripUnknowns = &p.tripUnknowns
	}
	if given("trip-window") {
		edit.Set.TripWindow = &p.tripWindow
	}
	if given("probe-base") {
		edit.Set.ProbeBase = &p.probeBase
	}
	if given("probe-max") {
		edit.Set.ProbeMax = &p.probeMax
	}
	failed, governed := ledger.FailedReasons(), ledger.GovernedReasons()
	if given("retryable") {
		if given("inherit-retryable") {
			return edit, c.usageError("--retryable and --inherit-retryable contradict each other: give one")
		}
		list := strings.TrimSpace(p.retryable)
		if list == "" {
			return edit, c.usageError("--retryable is empty: list reasons, or say none to retry nothing by policy")
		}
		edit.Set.RetryableReasons = []ledger.Reason{}
		if list != "none" {
			for _, name := range strings.Split(list, ",") {
				r := ledger.Reason(strings.TrimSpace(name))
				if !slices.Contains(failed, r) {
					return edit, c.usageError("--retryable: %q is not a reason of the failed state, and only those can be retried; give some of: %s",
						r, strings.Join(reasonList(governed), ", "))
				}
				if !slices.Contains(edit.Set.RetryableReasons, r) {
					edit.Set.RetryableReasons = append(edit.Set.RetryableReasons, r)
				}
			}
		}
	}
	var inherit []string
	if strings.TrimSpace(p.inherit) != "" {
		inherit = strings.Split(p.inherit, ",")
	} else if given("inherit") {
		return edit, c.usageError("--inherit is empty: name the fields (%s)", fieldFlags())
	}
	if p.inheritRetryable {
		inherit = append(inherit, "retryable")
	}
	for _, name := range inherit {
		f, ok := fieldNamed(name)
		if !ok {
			return edit, c.usageError("--inherit: %q is not a policy field; give some of: %s", strings.TrimSpace(name), fieldFlags())
		}
		if scope == ledger.GlobalScope {
			return edit, c.usageError("--inherit %s: the default policy sets every field; give --account to clear an account's override", f.flag)
		}
		if given(f.flag) {
			return edit, c.usageError("--%s and --inherit %s contradict each other: give one", f.flag, f.flag)
		}
		if !slices.Contains(edit.Inherit, f.field) {
			edit.Inherit = append(edit.Inherit, f.field)
		}
	}
	if len(setFields(edit.Set)) == 0 && len(edit.Inherit) == 0 {
		return edit, c.usageError("nothing to change: give at least one of --%s, or --inherit FIELD", strings.ReplaceAll(fieldFlags(), ", ", ", --"))
	}
	if err := edit.Check(scope); err != nil {
		return edit, c.usageError("%v", err)
	}
	return edit, ExitOK
}

func reasonList(rs []ledger.Reason) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

func getPolicy(ctx context.Context, c *line, scope string) int {
	l, closeLedger, err := openLedger(ctx, c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	layers, err := l.PolicyLayersFor(ctx, scope)
	if err != nil {
		return c.fail(err)
	}
	var overrides []ledger.PolicyRow
	if scope == ledger.GlobalScope {
		rows, err := l.Policies(ctx)
		if err != nil {
			return c.fail(err)
		}
		for _, r := range rows {
			if r.Scope != ledger.GlobalScope {
				overrides = append(overrides, r)
			}
		}
	}
	var own ledger.PolicyOverride
	if layers.Override != nil {
		own = layers.Override.PolicyOverride
	}
	overridden := setFields(own)

	if c.asJSON {
		out := struct {
			Scope      string                `json:"scope"`
			Effective  policyJSON            `json:"effective"`
			Overridden []string              `json:"overridden"`
			Default    policyJSON            `json:"default"`
			Override   *policyJSON           `json:"override,omitempty"`
			Overrides  map[string]policyJSON `json:"overrides,omitempty"`
		}{Scope: scope, Effective: toPolicyJSON(full(layers.Effective)), Overridden: []string{}, Default: toPolicyJSON(layers.Default.PolicyOverride)}
		for _, f := range overridden {
			out.Overridden = append(out.Overridden, string(f.field))
		}
		if layers.Override != nil {
			o := toPolicyJSON(own)
			out.Override = &o
		}
		if len(overrides) > 0 {
			out.Overrides = map[string]policyJSON{}
			for _, r := range overrides {
				out.Overrides[r.Scope] = toPolicyJSON(r.PolicyOverride)
			}
		}
		return writeJSON(c.io, out)
	}

	w := tabwriter.NewWriter(c.io.Stdout, 0, 4, 2, ' ', 0)
	effective := full(layers.Effective)
	if scope == ledger.GlobalScope {
		fmt.Fprintln(w, "FIELD\tDEFAULT")
		for _, f := range policyFields {
			v, _ := f.show(effective)
			fmt.Fprintf(w, "%s\t%s\n", f.flag, v)
		}
	} else {
		fmt.Fprintln(w, "FIELD\tIN FORCE\tFROM\tDEFAULT")
		for _, f := range policyFields {
			v, _ := f.show(effective)
			d, _ := f.show(layers.Default.PolicyOverride)
			from := "default"
			if _, set := f.show(own); set {
				from = "account"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", f.flag, v, from, d)
		}
	}
	_ = w.Flush()
	switch {
	case scope != ledger.GlobalScope && layers.Override != nil:
		fmt.Fprintf(c.io.Stdout, "\n%s overrides %d field(s), last set by %s at %s\n", scope, len(overridden), layers.Override.UpdatedBy, timestamp(layers.Override.UpdatedAt))
	case scope != ledger.GlobalScope:
		fmt.Fprintf(c.io.Stdout, "\n%s overrides nothing: it follows the default\n", scope)
	default:
		fmt.Fprintf(c.io.Stdout, "\nlast set by %s at %s\n", layers.Default.UpdatedBy, timestamp(layers.Default.UpdatedAt))
		if len(overrides) == 0 {
			fmt.Fprintln(c.io.Stdout, "no account overrides it")
		}
		for _, r := range overrides {
			var names []string
			for _, f := range setFields(r.PolicyOverride) {
				names = append(names, f.flag)
			}
			fmt.Fprintf(c.io.Stdout, "%s overrides: %s\n", r.Scope, strings.Join(names, ", "))
		}
	}
	return ExitOK
}

// setFields lists the fields a policy row sets.
func setFields(o ledger.PolicyOverride) []policyField {
	var out []policyField
	for _, f := range policyFields {
		if _, set := f.show(o); set {
			out = append(out, f)
		}
	}
	return out
}
