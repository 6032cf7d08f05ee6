package console

import "github.com/atmost/atmost/pkg/ledger"

// reasonMeaning says in a line what each reason means to a person; the runbook (runbook.go)
// says, for the parked and indeterminate ones, what to check and which action fits. A test requires a line for every reason of the ledger.
var reasonMeaning = map[ledger.Reason]string{
	ledger.ReasonSubmitted:      "stored by ingest, waiting for a dispatcher",
	ledger.ReasonClaimed:        "a dispatcher opened an attempt; nothing is authorized yet",
	ledger.ReasonAbandoned:      "a claim expired before authorization: nothing was sent",
	ledger.ReasonRetried:        "reopened after a failure that sent nothing",
	ledger.ReasonRestoreResumed: "after a restore: the stream shows it pending, never authorized since the backup",
	ledger.ReasonHeld:           "its account held when it came to authorization: the claim ended, nothing was sent, no attempt spent",
	ledger.ReasonAwaitingParent: "a reply whose parent was not published yet when it came to authorization: the claim ended, nothing was sent, no attempt spent",
	ledger.ReasonNotDue:         "its not_before was still ahead at authorization: the claim ended, nothing was sent, no attempt spent",

	ledger.ReasonAuthorized: "authorized: bytes may be leaving right now",

	ledger.ReasonPublished:         "sent, and the read-back confirmed the text",
	ledger.ReasonPublishedUnread:   "sent; the platform named the object, which the account takes as proof: nothing was read back",
	ledger.ReasonReconciledFound:   "the one lookup found it on the platform",
	ledger.ReasonEvidenceFound:     "a fenced-out worker's confirmed success",
	ledger.ReasonOperatorPublished: "a person resolved it as published",
	ledger.ReasonRestorePublished:  "after a restore: ATMOST_EVENTS shows it published",

	ledger.ReasonConnectionFailed:   "no byte left: refused, DNS or TLS failure",
	ledger.ReasonPlatformRejected:   "the platform refused it definitively",
	ledger.ReasonKillSwitch:         "a kill switch was on at authorization",
	ledger.ReasonRateLimited:        "the account's rate limit at authorization",
	ledger.ReasonCredentialRotating: "the credential changed since the attempt began",
	ledger.ReasonAccountDisabled:    "an operator disabled the account; it is retried once the account is enabled",
	ledger.ReasonCredentialRefused:  "the platform refused the account's credential; it is retried once the account serves again",
	ledger.ReasonCredentialRevoked:  "the account's credential is revoked",
	ledger.ReasonReconciledNotSent:  "the platform's idempotency-status lookup proved it was not sent",
	ledger.ReasonOperatorFailed:     "a person resolved it as not sent",

	ledger.ReasonSendUnknown:      "bytes left and no clear answer came back (timeout, reset, 5xx)",
	ledger.ReasonReadbackMismatch: "the platform said yes, but the read-back is missing or differs",
	ledger.ReasonLeaseExpired:     "the worker's lease expired after authorization",
	ledger.ReasonRestoreAhead:     "after a restore: the stream shows an authorization the ledger lost",

	ledger.ReasonDuplicateText:        "another intent of the account with the same text holds it: sent within its window, or stored first and still waiting",
	ledger.ReasonSupersededSource:     "its source is no longer the stored head",
	ledger.ReasonContractChanged:      "the platform contract is not the one pinned for the account",
	ledger.ReasonAttemptsExhausted:    "the attempt cap is reached",
	ledger.ReasonReconcileNotFound:    "the one lookup found nothing, which proves nothing on this platform",
	ledger.ReasonReconcileUnavailable: "the lookup could not be made",
	ledger.ReasonEvidenceConflict:     "the lookup says not sent, but a worker reported success",
	ledger.ReasonOperatorParked:       "a person said stop",
	ledger.ReasonRequestUnsendable:    "the platform adapter cannot render the request",
	ledger.ReasonRestoreParked:        "after a restore: the stream shows steps the ledger lost and cannot redo",
	ledger.ReasonDependencyUnmet:      "a reply whose parent (reply_to) ended without being published: nothing was sent",
	ledger.ReasonExpired:              "its expires_at passed before it was authorized: nothing was sent, and nothing will be",
	ledger.ReasonCancelled:            "its producer cancelled it before it was authorized: nothing was sent, and nothing will be",
}
