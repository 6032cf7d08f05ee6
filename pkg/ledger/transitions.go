package ledger

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
		OpBegin: {Pending, Parked}, // a claim, or parked when the attempt cap is reached
		OpPark:  {Parked},
	},
	PhasePendingClaimed: {
		OpAuthorize: {Authorized, Failed, Parked}, // passed, a transient gate, a terminal gate
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
