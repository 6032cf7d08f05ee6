package ledger

import "github.com/atmost/atmost/pkg/atmosttype"

// The ledger's vocabulary is package atmosttype's. These aliases keep the ledger's own names,
// which hundreds of lines of atmost use (ledger.Pending, ledger.ReasonClaimed, ledger.Sent);
// they are the same types and values, so either name may be written.
type (
	State           = atmosttype.State
	Reason          = atmosttype.Reason
	Retryability    = atmosttype.Retryability
	ReasonRule      = atmosttype.ReasonRule
	TransportResult = atmosttype.TransportResult
	LookupResult    = atmosttype.LookupResult
	Signal          = atmosttype.Signal
)

// The states, retryabilities, reasons, transport results, lookup results and signals, as
// atmosttype names them.
const (
	Pending                    = atmosttype.Pending
	Authorized                 = atmosttype.Authorized
	Published                  = atmosttype.Published
	Failed                     = atmosttype.Failed
	Indeterminate              = atmosttype.Indeterminate
	Parked                     = atmosttype.Parked
	Progress                   = atmosttype.Progress
	Done                       = atmosttype.Done
	RetryYes                   = atmosttype.RetryYes
	RetryByPolicy              = atmosttype.RetryByPolicy
	RetryNever                 = atmosttype.RetryNever
	Human                      = atmosttype.Human
	ReasonSubmitted            = atmosttype.ReasonSubmitted
	ReasonClaimed              = atmosttype.ReasonClaimed
	ReasonAbandoned            = atmosttype.ReasonAbandoned
	ReasonRetried              = atmosttype.ReasonRetried
	ReasonRestoreResumed       = atmosttype.ReasonRestoreResumed
	ReasonHeld                 = atmosttype.ReasonHeld
	ReasonAwaitingParent       = atmosttype.ReasonAwaitingParent
	ReasonNotDue               = atmosttype.ReasonNotDue
	ReasonAuthorized           = atmosttype.ReasonAuthorized
	ReasonPublished            = atmosttype.ReasonPublished
	ReasonPublishedUnread      = atmosttype.ReasonPublishedUnread
	ReasonReconciledFound      = atmosttype.ReasonReconciledFound
	ReasonEvidenceFound        = atmosttype.ReasonEvidenceFound
	ReasonOperatorPublished    = atmosttype.ReasonOperatorPublished
	ReasonRestorePublished     = atmosttype.ReasonRestorePublished
	ReasonConnectionFailed     = atmosttype.ReasonConnectionFailed
	ReasonPlatformRejected     = atmosttype.ReasonPlatformRejected
	ReasonKillSwitch           = atmosttype.ReasonKillSwitch
	ReasonAccountDisabled      = atmosttype.ReasonAccountDisabled
	ReasonCredentialRefused    = atmosttype.ReasonCredentialRefused
	ReasonRateLimited          = atmosttype.ReasonRateLimited
	ReasonCredentialRotating   = atmosttype.ReasonCredentialRotating
	ReasonCredentialRevoked    = atmosttype.ReasonCredentialRevoked
	ReasonReconciledNotSent    = atmosttype.ReasonReconciledNotSent
	ReasonOperatorFailed       = atmosttype.ReasonOperatorFailed
	ReasonSendUnknown          = atmosttype.ReasonSendUnknown
	ReasonReadbackMismatch     = atmosttype.ReasonReadbackMismatch
	ReasonLeaseExpired         = atmosttype.ReasonLeaseExpired
	ReasonRestoreAhead         = atmosttype.ReasonRestoreAhead
	ReasonDuplicateText        = atmosttype.ReasonDuplicateText
	ReasonSupersededSource     = atmosttype.ReasonSupersededSource
	ReasonContractChanged      = atmosttype.ReasonContractChanged
	ReasonAttemptsExhausted    = atmosttype.ReasonAttemptsExhausted
	ReasonReconcileNotFound    = atmosttype.ReasonReconcileNotFound
	ReasonReconcileUnavailable = atmosttype.ReasonReconcileUnavailable
	ReasonEvidenceConflict     = atmosttype.ReasonEvidenceConflict
	ReasonOperatorParked       = atmosttype.ReasonOperatorParked
	ReasonRequestUnsendable    = atmosttype.ReasonRequestUnsendable
	ReasonRestoreParked        = atmosttype.ReasonRestoreParked
	ReasonDependencyUnmet      = atmosttype.ReasonDependencyUnmet
	ReasonExpired              = atmosttype.ReasonExpired
	ReasonCancelled            = atmosttype.ReasonCancelled
	Sent                       = atmosttype.Sent
	NotSent                    = atmosttype.NotSent
	Unknown                    = atmosttype.Unknown
	Found                      = atmosttype.Found
	ProvenNotSent              = atmosttype.ProvenNotSent
	NotFound                   = atmosttype.NotFound
	Unavailable                = atmosttype.Unavailable
	SignalOK                   = atmosttype.SignalOK
	SignalUnavailable          = atmosttype.SignalUnavailable
	SignalAuth                 = atmosttype.SignalAuth
	SignalUnknown              = atmosttype.SignalUnknown
	SignalNeutral              = atmosttype.SignalNeutral
)
