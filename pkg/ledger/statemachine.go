package ledger

import (
	"slices"

	"github.com/atmost/atmost/pkg/atmosttype"
)

// This file is the state machine: the phases and operations (the six states, every reason
// with its state and what may be retried after it are package atmosttype's), the table of allowed transitions, and for each
// operation the statements that guard it. Start here; the SQL of pkg/ledger/queries holds each
// guard in the statement that changes the row, and walk_test.go runs every (phase, operation)
// of the table against a real database.

// Phase refines State where the state machine needs more than the state: whether a pending
// intent holds a claim, and whether a lease is still live. Phases exist only in this table and
// in tests; the database stores the state and the lease.
type Phase string

// The phases of an intent. PhaseNone is an intent that does not exist yet.
const (
	PhaseNone              Phase = "none"
	PhasePendingFree       Phase = "pending"
	PhasePendingClaimed    Phase = "pending+claim"
	PhasePendingStale      Phase = "pending+expired-claim"
	PhaseAuthorizedLive    Phase = "authorized"
	PhaseAuthorizedExpired Phase = "authorized+expired-lease"
	PhasePublished         Phase = "published"
	PhaseFailed            Phase = "failed"
	PhaseIndeterminate     Phase = "indeterminate"
	PhaseParked            Phase = "parked"
)

// Phases lists every phase (a new slice at each call).
func Phases() []Phase { return slices.Clone(phases) }

var phases = []Phase{
	PhaseNone, PhasePendingFree, PhasePendingClaimed, PhasePendingStale, PhaseAuthorizedLive,
	PhaseAuthorizedExpired, PhasePublished, PhaseFailed, PhaseIndeterminate, PhaseParked,
}

// Operation names a ledger operation that can change an intent's state.
type Operation string

// The operations of the state machine.
const (
	OpSubmit    Operation = "submit"
	OpBegin     Operation = "begin"
	OpAuthorize Operation = "authorize"
	OpComplete  Operation = "complete"
	OpRetry     Operation = "retry"
	OpExpire    Operation = "expire"
	OpReconcile Operation = "reconcile"
	OpPark      Operation = "park"
	OpResolve   Operation = "resolve"
	OpCancel    Operation = "cancel"
)

// Operations lists every operation (a new slice at each call).
func Operations() []Operation { return slices.Clone(operations) }

var operations = []Operation{OpSubmit, OpBegin, OpAuthorize, OpComplete, OpRetry, OpExpire, OpReconcile, OpPark, OpResolve, OpCancel}

// Transitions returns the state machine as data (a deep copy at each call): for each phase and operation, the states the
// operation may lead to. A missing entry means the operation is refused in that phase and
// changes nothing. The SQL guards mirror this table, and a test walks every (phase, operation)
// pair against the real database.
//
// What is absent matters most: nothing leads from Indeterminate or Authorized back to Pending,
// nothing leaves Published, only Retry leaves Failed for Pending, and Park is refused while an
// authorized worker's lease is live.
func Transitions() map[Phase]map[Operation][]State {
	out := make(map[Phase]map[Operation][]State, len(transitions))
	for phase, ops := range transitions {
		out[phase] = make(map[Operation][]State, len(ops))
		for op, to := range ops {
			out[phase][op] = slices.Clone(to)
		}
	}
	return out
}

var transitions = map[Phase]map[Operation][]State{
	PhaseNone: {
		OpSubmit: {Pending},
	},
	PhasePendingFree: {
		OpBegin:  {Pending, Parked}, // a claim (none while the account holds or before not_before), or parked when the attempt cap is reached or expires_at passed
		OpPark:   {Parked},
		OpCancel: {Parked}, // cancelled: not yet authorized
	},
	PhasePendingClaimed: {
		OpAuthorize: {Authorized, Failed, Parked, Pending}, // passed, a transient gate, a terminal gate (expired among them), the account holds, not_before is ahead or a reply's parent is not published
		OpPark:      {Parked},
		OpCancel:    {Parked}, // the claim is not an authorization: Authorize's fence then refuses it
	},
	PhasePendingStale: {
		OpBegin:  {Pending, Parked}, // the stale claim is abandoned, then as from PhasePendingFree
		OpExpire: {Pending},         // abandoned: nothing was sent, the intent is free
		OpPark:   {Parked},
		OpCancel: {Parked},
	},
	PhaseAuthorizedLive: {
		OpComplete: {Published, Failed, Indeterminate},
	},
	PhaseAuthorizedExpired: {
		OpComplete: {Published, Failed, Indeterminate}, // the outcome beat the sweeper
		OpExpire:   {Indeterminate},
		OpPark:     {Parked},
	},
	PhaseFailed: {
		OpRetry:  {Pending, Parked}, // parked when the attempt cap is reached
		OpPark:   {Parked},
		OpCancel: {Parked}, // nothing was sent: the retry it waits for never comes
	},
	PhaseIndeterminate: {
		OpReconcile: {Published, Failed, Parked},
		OpPark:      {Parked},
	},
	PhaseParked: {
		OpResolve: {Published, Failed},
	},
}

// Allowed returns the states op may lead to from phase, and false when op is refused there.
func Allowed(phase Phase, op Operation) ([]State, bool) {
	to, ok := transitions[phase][op]
	return slices.Clone(to), ok
}

// Guards returns, for each operation (a new map at each call), the statements that hold its guards: the queries in
// pkg/ledger/queries (file: query name) whose WHERE clauses decide, on the row they change,
// whether the transition happens. A test requires each to exist. The restore protocol's
// statements (restore.sql) are not an operation of this table: they move intents only as the
// event stream proves (docs/design.md#the-restore-protocol says how).
func Guards() map[Operation][]string {
	out := make(map[Operation][]string, len(guards))
	for op, stmts := range guards {
		out[op] = slices.Clone(stmts)
	}
	return out
}

var guards = map[Operation][]string{
	OpSubmit:    {"submit.sql: IntentSubmit"},
	OpBegin:     {"begin_many.sql: IntentsBegin"},
	OpAuthorize: {"authorize_many.sql: IntentsAuthorize"},
	OpComplete:  {"complete_many.sql: IntentsComplete"},
	OpRetry:     {"retry.sql: IntentRetry", "retry_many.sql: IntentsRetryMany"},
	OpExpire:    {"expire.sql: IntentsExpireLeases"},
	OpReconcile: {"reconcile.sql: ReconciliationClaim", "reconcile.sql: ReconciliationResolve", "reconcile.sql: IntentResolveFromEvidence"},
	OpPark: {"operator.sql: IntentPark", "fence.sql: IntentParkUnsendable", "fence.sql: IntentsParkSuperseded",
		"recovery.sql: IntentsParkUnreconciled", "replies.sql: IntentsParkDependencyUnmet"},
	OpResolve: {"operator.sql: IntentResolve"},
	OpCancel:  {"cancel.sql: IntentCancel"},
}

// reasonsOf lists, in order, the reasons that lead to state: the scans name them so that
// intents_sweep_idx (state, reason, updated_at) is read in ranges.
func reasonsOf(state State) []string {
	var out []string
	for r, rule := range atmosttype.Reasons() {
		if rule.State == state {
			out = append(out, string(r))
		}
	}
	slices.Sort(out)
	return out
}

// alwaysRetried lists the reasons retried whatever the policy says: those that prove no byte
// left (RetryYes).
func alwaysRetried() []string {
	var out []string
	for r, rule := range atmosttype.Reasons() {
		if rule.Retry == RetryYes {
			out = append(out, string(r))
		}
	}
	slices.Sort(out)
	return out
}

// GovernedReasons lists the reasons of the failed state a policy's retryable_reasons governs,
// in name order: all but those retried always (RetryYes), which a policy may not name.
func GovernedReasons() []Reason {
	var out []Reason
	for _, r := range FailedReasons() {
		if rule, _ := r.Rule(); rule.Retry == RetryByPolicy {
			out = append(out, r)
		}
	}
	return out
}

// FailedReasons lists the reasons of the failed state, in name order: the only reasons a policy
// may retry.
func FailedReasons() []Reason {
	var out []Reason
	for r, rule := range atmosttype.Reasons() {
		if rule.State == Failed {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}
