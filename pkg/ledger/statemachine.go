package ledger

import "slices"

// This file is the state machine: the six states, every reason with its state and what may be
// retried after it, the phases and operations, the table of allowed transitions, and for each
// operation the statements that guard it. Start here; the SQL of pkg/ledger/queries holds each
// guard in the statement that changes the row, and walk_test.go runs every (phase, operation)
// of the table against a real database.

// State is the state of a delivery intent. There are exactly six.
type State string

// The six states. A claimed but not yet authorized intent is Pending with an open attempt and
// a live pre-authorization lease.
const (
	// Pending: waiting for, or claimed by, a worker. Nothing has been authorized.
	Pending State = "pending"
	// Authorized: the before-byte checkpoint passed; bytes may be leaving. Only the worker's
	// outcome or the expiry of its lease moves it on, and never back to Pending.
	Authorized State = "authorized"
	// Published: the platform holds the object and the read-back confirmed its text. Terminal.
	Published State = "published"
	// Failed: nothing was sent, proven. The only state from which a retry is allowed.
	Failed State = "failed"
	// Indeterminate: the outcome is unknown. Never retried; reconciled by one lookup.
	Indeterminate State = "indeterminate"
	// Parked: a human owns it. No machine moves it on.
	Parked State = "parked"
)

// States lists the six states in lifecycle order.
var States = []State{Pending, Authorized, Published, Failed, Indeterminate, Parked}

// Valid reports whether s is one of the six states.
func (s State) Valid() bool {
	for _, v := range States {
		if s == v {
			return true
		}
	}
	return false
}

// Reason says why an intent is in its state. Every reason belongs to exactly one state; the
// mapping is the table Reasons, which the reasons table of docs/design.md#reasons repeats (a
// test keeps the two equal).
type Reason string

// Retryability says what may happen after a reason.
type Retryability string

const (
	// Progress: a step of the normal path, nothing to retry.
	Progress Retryability = "progress"
	// Done: published; nothing is ever sent again.
	Done Retryability = "done"
	// RetryYes: nothing was sent; retried automatically, whatever the policy says: the intent
	// waits for an operator's change (account_disabled: until the account is enabled), and no
	// policy governs it.
	RetryYes Retryability = "yes"
	// RetryByPolicy: nothing was sent; retried automatically when the policy lists the reason.
	RetryByPolicy Retryability = "by policy"
	// RetryNever: the outcome is unknown; never resent, reconciled by one lookup.
	RetryNever Retryability = "never"
	// Human: parked or resolved by an operator; no machine moves it on.
	Human Retryability = "human"
)

// Reasons the ledger writes.
const (
	ReasonSubmitted      Reason = "submitted"       // created by ingest
	ReasonClaimed        Reason = "claimed"         // Begin opened an attempt (pending with a claim)
	ReasonAbandoned      Reason = "abandoned"       // the pre-authorization lease expired: nothing was sent
	ReasonRetried        Reason = "retried"         // Retry reopened a failed intent
	ReasonRestoreResumed Reason = "restore_resumed" // after a restore: the stream shows it pending, never authorized since the backup
	ReasonHeld           Reason = "held"            // Authorize found the account holding: the claim ended, no attempt spent

	ReasonAuthorized Reason = "authorized"

	ReasonPublished         Reason = "published"          // sent, and the read-back confirmed the text
	ReasonPublishedUnread   Reason = "published_unread"   // sent; the 2xx naming the object is the proof the account chose; nothing was read back
	ReasonReconciledFound   Reason = "reconciled_found"   // the one lookup found it
	ReasonEvidenceFound     Reason = "evidence_found"     // a fenced-out worker's confirmed success
	ReasonOperatorPublished Reason = "operator_published" // a human resolved it as published
	ReasonRestorePublished  Reason = "restore_published"  // after a restore: ATMOST_EVENTS shows it published

	ReasonConnectionFailed   Reason = "connection_failed"   // refused, DNS or TLS failure before any byte
	ReasonPlatformRejected   Reason = "platform_rejected"   // a definitive refusal (the adapter's list)
	ReasonKillSwitch         Reason = "kill_switch"         // a kill switch was on at authorization
	ReasonAccountDisabled    Reason = "account_disabled"    // an operator disabled the account
	ReasonRateLimited        Reason = "rate_limited"        // the account's rate limit at authorization
	ReasonCredentialRotating Reason = "credential_rotating" // the credential changed since Begin
	ReasonCredentialRevoked  Reason = "credential_revoked"  // the account's credential is revoked
	ReasonReconciledNotSent  Reason = "reconciled_not_sent" // an idempotency-status lookup proved not sent
	ReasonOperatorFailed     Reason = "operator_failed"     // a human resolved it as not sent

	ReasonSendUnknown      Reason = "send_unknown"      // timeout or reset after bytes left; 5xx; no object id
	ReasonReadbackMismatch Reason = "readback_mismatch" // success, but the read-back is missing or different
	ReasonLeaseExpired     Reason = "lease_expired"     // the worker's lease expired after authorization
	ReasonRestoreAhead     Reason = "restore_ahead"     // after a restore: ATMOST_EVENTS shows an authorization the ledger lost

	ReasonDuplicateText        Reason = "duplicate_text"        // the same text in the account's window
	ReasonSupersededSource     Reason = "superseded_source"     // the source is no longer the stored head
	ReasonContractChanged      Reason = "contract_changed"      // the platform contract is not the one pinned
	ReasonAttemptsExhausted    Reason = "attempts_exhausted"    // the attempt cap is reached
	ReasonReconcileNotFound    Reason = "reconcile_not_found"   // the one lookup found nothing, which proves nothing
	ReasonReconcileUnavailable Reason = "reconcile_unavailable" // the lookup could not be made
	ReasonEvidenceConflict     Reason = "evidence_conflict"     // the lookup says not sent, a worker reported success
	ReasonOperatorParked       Reason = "operator_parked"       // a human said stop
	ReasonRequestUnsendable    Reason = "request_unsendable"    // the platform adapter cannot render the request
	ReasonRestoreParked        Reason = "restore_parked"        // after a restore: the stream shows steps the ledger lost and cannot redo
)

// ReasonRule is where a reason leads.
type ReasonRule struct {
	State State
	Retry Retryability
}

// Reasons maps every reason the ledger writes to its state and retryability. It is the one
// place that says so in code.
var Reasons = map[Reason]ReasonRule{
	ReasonSubmitted:      {Pending, Progress},
	ReasonClaimed:        {Pending, Progress},
	ReasonAbandoned:      {Pending, Progress},
	ReasonRetried:        {Pending, Progress},
	ReasonRestoreResumed: {Pending, Progress},
	ReasonHeld:           {Pending, Progress},

	ReasonAuthorized: {Authorized, Progress},

	ReasonPublished:         {Published, Done},
	ReasonPublishedUnread:   {Published, Done},
	ReasonReconciledFound:   {Published, Done},
	ReasonEvidenceFound:     {Published, Done},
	ReasonOperatorPublished: {Published, Done},
	ReasonRestorePublished:  {Published, Done},

	ReasonConnectionFailed:   {Failed, RetryByPolicy},
	ReasonPlatformRejected:   {Failed, RetryByPolicy},
	ReasonKillSwitch:         {Failed, RetryByPolicy},
	ReasonAccountDisabled:    {Failed, RetryYes},
	ReasonRateLimited:        {Failed, RetryByPolicy},
	ReasonCredentialRotating: {Failed, RetryByPolicy},
	ReasonCredentialRevoked:  {Failed, RetryByPolicy},
	ReasonReconciledNotSent:  {Failed, RetryByPolicy},
	ReasonOperatorFailed:     {Failed, RetryByPolicy},

	ReasonSendUnknown:      {Indeterminate, RetryNever},
	ReasonReadbackMismatch: {Indeterminate, RetryNever},
	ReasonLeaseExpired:     {Indeterminate, RetryNever},
	ReasonRestoreAhead:     {Indeterminate, RetryNever},

	ReasonDuplicateText:        {Parked, Human},
	ReasonSupersededSource:     {Parked, Human},
	ReasonContractChanged:      {Parked, Human},
	ReasonAttemptsExhausted:    {Parked, Human},
	ReasonReconcileNotFound:    {Parked, Human},
	ReasonReconcileUnavailable: {Parked, Human},
	ReasonEvidenceConflict:     {Parked, Human},
	ReasonOperatorParked:       {Parked, Human},
	ReasonRequestUnsendable:    {Parked, Human},
	ReasonRestoreParked:        {Parked, Human},
}

// Rule returns where r leads, and false for a reason the ledger does not know.
func (r Reason) Rule() (ReasonRule, bool) {
	rule, ok := Reasons[r]
	return rule, ok
}

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

// Phases lists every phase.
var Phases = []Phase{
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
)

// Operations lists every operation.
var Operations = []Operation{OpSubmit, OpBegin, OpAuthorize, OpComplete, OpRetry, OpExpire, OpReconcile, OpPark, OpResolve}

// Transitions is the state machine as data: for each phase and operation, the states the
// operation may lead to. A missing entry means the operation is refused in that phase and
// changes nothing. The SQL guards mirror this table, and a test walks every (phase, operation)
// pair against the real database.
//
// What is absent matters most: nothing leads from Indeterminate or Authorized back to Pending,
// nothing leaves Published, only Retry leaves Failed for Pending, and Park is refused while an
// authorized worker's lease is live.
var Transitions = map[Phase]map[Operation][]State{
	PhaseNone: {
		OpSubmit: {Pending},
	},
	PhasePendingFree: {
		OpBegin: {Pending, Parked}, // a claim (none while the account holds), or parked when the attempt cap is reached
		OpPark:  {Parked},
	},
	PhasePendingClaimed: {
		OpAuthorize: {Authorized, Failed, Parked, Pending}, // passed, a transient gate, a terminal gate, the account holds
		OpPark:      {Parked},
	},
	PhasePendingStale: {
		OpBegin:  {Pending, Parked}, // the stale claim is abandoned, then as from PhasePendingFree
		OpExpire: {Pending},         // abandoned: nothing was sent, the intent is free
		OpPark:   {Parked},
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
		OpRetry: {Pending, Parked}, // parked when the attempt cap is reached
		OpPark:  {Parked},
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
	to, ok := Transitions[phase][op]
	return to, ok
}

// Guards names, for each operation, the statements that hold its guards: the queries in
// pkg/ledger/queries (file: query name) whose WHERE clauses decide, on the row they change,
// whether the transition happens. A test requires each to exist. The restore protocol's
// statements (restore.sql) are not an operation of this table: they move intents only as the
// event stream proves (docs/design.md#the-restore-protocol says how).
var Guards = map[Operation][]string{
	OpSubmit:    {"submit.sql: IntentSubmit"},
	OpBegin:     {"begin_many.sql: IntentsBegin"},
	OpAuthorize: {"authorize_many.sql: IntentsAuthorize"},
	OpComplete:  {"complete_many.sql: IntentsComplete"},
	OpRetry:     {"retry.sql: IntentRetry", "retry_many.sql: IntentsRetryMany"},
	OpExpire:    {"expire.sql: IntentsExpireLeases"},
	OpReconcile: {"reconcile.sql: ReconciliationClaim", "reconcile.sql: ReconciliationResolve", "reconcile.sql: IntentResolveFromEvidence"},
	OpPark: {"operator.sql: IntentPark", "fence.sql: IntentParkUnsendable", "fence.sql: IntentsParkSuperseded",
		"recovery.sql: IntentsParkUnreconciled"},
	OpResolve: {"operator.sql: IntentResolve"},
}

// reasonsOf lists, in order, the reasons that lead to state: the scans name them so that
// intents_sweep_idx (state, reason, updated_at) is read in ranges.
func reasonsOf(state State) []string {
	var out []string
	for r, rule := range Reasons {
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
	for r, rule := range Reasons {
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
		if Reasons[r].Retry == RetryByPolicy {
			out = append(out, r)
		}
	}
	return out
}

// FailedReasons lists the reasons of the failed state, in name order: the only reasons a policy
// may retry.
func FailedReasons() []Reason {
	var out []Reason
	for r, rule := range Reasons {
		if rule.State == Failed {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}
