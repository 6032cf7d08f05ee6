package atmosttype

import "maps"

// Reason says why an intent is in its state. Every reason belongs to exactly one state; the
// mapping is the table Reasons returns, which the reasons table of docs/design.md#reasons
// repeats (a test keeps the two equal).
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
	ReasonAwaitingParent Reason = "awaiting_parent" // Authorize found a reply's parent not published yet: the claim ended, no attempt spent
	ReasonNotDue         Reason = "not_due"         // Authorize found not_before still ahead: the claim ended, no attempt spent

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
	ReasonCredentialRefused  Reason = "credential_refused"  // the platform refused the credential (401, 403 as declared): nothing sent
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
	ReasonDependencyUnmet      Reason = "dependency_unmet"      // a reply's parent (reply_to) ended parked or failed for good: never published
	ReasonExpired              Reason = "expired"               // expires_at passed before it was authorized: never sent
	ReasonCancelled            Reason = "cancelled"             // its producer cancelled it before it was authorized: never sent
)

// ReasonRule is where a reason leads.
type ReasonRule struct {
	State State
	Retry Retryability
}

// reasons maps every reason the ledger writes to its state and retryability. It is the one
// place that says so in code; Reasons returns a copy.
var reasons = map[Reason]ReasonRule{
	ReasonSubmitted:      {Pending, Progress},
	ReasonClaimed:        {Pending, Progress},
	ReasonAbandoned:      {Pending, Progress},
	ReasonRetried:        {Pending, Progress},
	ReasonRestoreResumed: {Pending, Progress},
	ReasonHeld:           {Pending, Progress},
	ReasonAwaitingParent: {Pending, Progress},
	ReasonNotDue:         {Pending, Progress},

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
	ReasonCredentialRefused:  {Failed, RetryYes},
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
	ReasonDependencyUnmet:      {Parked, Human},
	ReasonExpired:              {Parked, Human},
	ReasonCancelled:            {Parked, Human},
}

// Reasons returns every reason the ledger writes with its state and retryability (a new map
// at each call).
func Reasons() map[Reason]ReasonRule { return maps.Clone(reasons) }

// Rule returns where r leads, and false for a reason the ledger does not know.
func (r Reason) Rule() (ReasonRule, bool) {
	rule, ok := reasons[r]
	return rule, ok
}
