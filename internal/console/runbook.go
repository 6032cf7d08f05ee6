package console

import (
	"fmt"
	"html/template"
	"strings"

	"github.com/atmost/atmost/pkg/ledger"
)

// The operators' runbook, for every reason that hands an intent to a person (parked) or to its
// one lookup (indeterminate): what happened, what to check, and which action fits. It is the
// one source of both the intent page's runbook and the reason sections of docs/operators.md,
// which are generated from it (RunbookMarkdown): TestTheRunbookIsTheOperatorsDoc keeps them
// equal, and ATMOST_WRITE_RUNBOOK=1 writes the doc's sections again after a change here.

// An action the intent page offers, by the name its form posts.
const (
	fitPublished = "resolve-published"
	fitFailed    = "resolve-failed"
	fitResend    = "resend"
	fitPark      = "park"
)

// fitTitles are the actions' names as the page's buttons show them.
var fitTitles = map[string]string{
	fitPublished: "Resolve as published…",
	fitFailed:    "Resolve as failed…",
	fitResend:    "Not sent, send again…",
	fitPark:      "Park…",
}

// runbookEntry is one reason's page of the runbook. Text in backquotes is a name to type or
// read (a reason, a command, a metric).
type runbookEntry struct {
	// What happened, in a paragraph.
	What string `json:"what"`
	// Check is what to look at before acting; "" when there is nothing to check.
	Check string `json:"check"`
	// Then is which action fits, and when.
	Then string `json:"then"`
	// Fits are the intent page's actions that fit the reason, in the order the runbook prefers
	// them. The "not sent, send again" action is offered only where it fits.
	Fits []string `json:"fits"`
}

// runbookOrder is the order of the doc's sections: the parked reasons, then the indeterminate.
var runbookOrder = []ledger.Reason{
	ledger.ReasonReconcileNotFound, ledger.ReasonReconcileUnavailable, ledger.ReasonEvidenceConflict,
	ledger.ReasonAttemptsExhausted, ledger.ReasonDuplicateText, ledger.ReasonSupersededSource,
	ledger.ReasonContractChanged, ledger.ReasonRequestUnsendable, ledger.ReasonDependencyUnmet, ledger.ReasonOperatorParked,
	ledger.ReasonRestoreParked, ledger.ReasonExpired, ledger.ReasonCancelled,
	ledger.ReasonSendUnknown, ledger.ReasonReadbackMismatch, ledger.ReasonLeaseExpired, ledger.ReasonRestoreAhead,
}

var runbook = map[ledger.Reason]runbookEntry{
	ledger.ReasonReconcileNotFound: {
		What: "The send's outcome was unknown, the one lookup was made, and it found nothing. On a platform without a " +
			"status lookup that proves not-sent (Bluesky is one) \"not found\" proves nothing: the object may exist under " +
			"an id the lookup cannot see, be delayed, or have been deleted since.",
		Check: "the account's profile or feed on the platform for the intent's text around the time of the attempt (its " +
			"history has it), and the platform's own request log if you have one.",
		Then: "resolve as published with the object id when you find it; when you are sure nothing was created, not " +
			"sent, send again (or resolve as failed if it should not go out); otherwise leave it parked.",
		Fits: []string{fitPublished, fitResend, fitFailed},
	},
	ledger.ReasonReconcileUnavailable: {
		What: "The lookup could not be made (the platform's API was down, timed out, or refused the lookup).",
		Check: "the platform's status and the reconciler's log lines for the error (the attempt's reconciliation step has " +
			"its detail).",
		Then: "as for `reconcile_not_found`, find the object on the platform yourself and resolve; there is no second " +
			"automatic lookup.",
		Fits: []string{fitPublished, fitResend, fitFailed},
	},
	ledger.ReasonEvidenceConflict: {
		What: "The lookup said \"not sent\", but a worker reported a success for the same attempt. One of them is wrong, " +
			"and atmost will not pick.",
		Check: "the evidence of the attempt (the worker's object id) on the platform.",
		Then: "resolve as published with that id if it is there; only if it is provably absent, not sent, send again " +
			"(or resolve as failed).",
		Fits: []string{fitPublished, fitResend, fitFailed},
	},
	ledger.ReasonAttemptsExhausted: {
		What: "The intent reached its attempt cap: every attempt that reached authorization failed without sending (or " +
			"the last one was retried once too often). Nothing is unknown about it.",
		Check: "why the attempts failed (each attempt's evidence: a refusal, a connection failure, a rate limit).",
		Then: "fix the cause and raise the cap if it was too low (Controls, or `atmost policy set --attempt-cap`), then " +
			"not sent, send again (offered once the cap allows another attempt); or resolve it as failed and leave it.",
		Fits: []string{fitResend, fitFailed},
	},
	ledger.ReasonDuplicateText: {
		What: "Another intent of the account with the same text holds it: one published within the duplicate-text " +
			"window, or one stored before this one that still waits to be sent (the one stored first is kept), so this " +
			"one was stopped before it could repeat it. Nothing of it was sent.",
		Check: "the intent that holds the text: the page names it (Text held by, linked) and when the window ends " +
			"(Window ends: a time, or how long after the holder's authorization while the holder still waits), as " +
			"`atmost intents show` does.",
		Then: "resolve as failed if it is a repeat nobody wants; if it is meant to go out again, not sent, send again " +
			"after the window (before it ends it is parked again), or ask the producer for a new `occurrence`.",
		Fits: []string{fitFailed, fitResend},
	},
	ledger.ReasonSupersededSource: {
		What:  "The intent rests on a version of its source that is no longer the stored head: a newer version of the same source arrived.",
		Check: "the newer intent of the same source.",
		Then:  "resolve as failed: the newer version is the one to publish, so this one is never sent again.",
		Fits:  []string{fitFailed},
	},
	ledger.ReasonContractChanged: {
		What:  "The platform contract the adapter speaks is not the one pinned for the account. atmost will not send with a contract nobody checked.",
		Check: "the account's pinned contract version (`atmost accounts ls`) against the adapter's.",
		Then:  "re-pin the account once the new contract is known to be right, then not sent, send again.",
		Fits:  []string{fitResend, fitFailed},
	},
	ledger.ReasonRequestUnsendable: {
		What: "The platform adapter cannot render the request (a field the platform does not take, a text too long), " +
			"or the account's settings refuse what it names (a Bluesky image from a host or an address they do not " +
			"allow; the detail says which). Nothing was sent and nothing can be: sending it again would only park it again.",
		Then: "resolve as failed, and tell the producer; the exact request is on the intent's page. When the image's " +
			"host should have been allowed, add it to the account's `media_hosts` (docs/platforms.md, \"Where images " +
			"are fetched from\") before the producer publishes again.",
		Fits: []string{fitFailed},
	},
	ledger.ReasonDependencyUnmet: {
		What: "The intent is a reply (its envelope names `reply_to`, a parent intent's delivery key, as the posts of a " +
			"thread do) and its parent ended without being published: parked, or failed for a reason its policy does not " +
			"retry. A reply is sent only to its parent's object, so nothing of it was sent and no attempt was made.",
		Check: "the parent: the history row names it (`reply_to`) and how it ended (`parent_state`, `parent_reason`); " +
			"`atmost intents show` the parent, and its own runbook entry. The later posts of a thread are parked the same " +
			"way, each naming the one before.",
		Then: "if the parent should go out, settle it first (resolve it as published with its object id, or send it " +
			"again); once it is published, not sent, send again: the reply then targets the parent's object. If the " +
			"thread is abandoned, resolve as failed.",
		Fits: []string{fitResend, fitFailed},
	},
	ledger.ReasonOperatorParked: {
		What: "A person parked it (the history says who and why).",
		Then: "whatever that person meant: resolve it, or send it again, when the question is answered.",
		Fits: []string{fitPublished, fitResend, fitFailed},
	},
	ledger.ReasonRestoreParked: {
		What: "After a ledger restore, `ATMOST_EVENTS` showed steps the restored ledger had lost and cannot redo, " +
			"possibly after an authorization: bytes may have left.",
		Check: "the platform for the object, as for `reconcile_not_found`.",
		Then:  "resolve as published with its id, or, with evidence that it is not there, not sent, send again (or resolve as failed).",
		Fits:  []string{fitPublished, fitResend, fitFailed},
	},
	ledger.ReasonExpired: {
		What: "The intent's `expires_at` passed before it was authorized (Begin or Authorize found it so: a long " +
			"outage, a held account, a backlog, a retry that came late). Nothing was sent, and nothing ever will be: " +
			"sending it again parks it again, because the expiry is part of the intent.",
		Check: "why it waited so long (its history: a held account, a kill switch, failed attempts); many at once " +
			"point at an outage, not at the intents.",
		Then: "resolve as failed to close it; if the message still matters, the producer publishes it again as a new " +
			"intent (a new `occurrence`) with a new `expires_at`.",
		Fits: []string{fitFailed},
	},
	ledger.ReasonCancelled: {
		What: "Its producer cancelled it (`atmost.cancel.<account-token>`, `client.Cancel` or `DELETE /v1/intents/{key}`) " +
			"before it was authorized. Nothing was sent, and nothing will be: the producer's word stands.",
		Check: "nothing: the history names who cancelled it (the producer's token, or `producer` on NATS) and when.",
		Then: "resolve as failed if you want it closed; leave it parked otherwise. Only the producer decides to send " +
			"it after all, as a new intent.",
		Fits: []string{fitFailed},
	},
	ledger.ReasonSendUnknown: {
		What: "The request was sent and no clear answer came back: a timeout, a reset, a 5xx, a success without an object id.",
		Check: "the reconciler's backlog (`atmost_reconcile_oldest_waiting_seconds`) and when this intent's lookup is " +
			"due (the intent's page says).",
		Then: "nothing: the lookup decides. Act only if it stays.",
	},
	ledger.ReasonReadbackMismatch: {
		What:  "The platform answered success, but reading the object back found it missing or with other text.",
		Check: "the object id in the attempt's evidence on the platform: a platform that edits text, or a read-your-writes delay.",
		Then:  "the lookup decides; park it to decide yourself.",
		Fits:  []string{fitPark},
	},
	ledger.ReasonLeaseExpired: {
		What: "The worker's lease expired after authorization: it died, stalled or was cut off while a send may have " +
			"been in flight. The attempt's evidence says so: outcome `unknown`, reason `lease_expired` (an expired claim " +
			"that was never authorized is `abandoned` instead: nothing was sent). Many of these at once mean workers are " +
			"dying mid-send (`atmost_sweep_changes_total{duty=\"lease_expired\"}`).",
		Check: "the dispatchers' logs and restarts.",
		Then:  "the lookup decides each intent.",
	},
	ledger.ReasonRestoreAhead: {
		What: "After a ledger restore, `ATMOST_EVENTS` showed an authorization the ledger lost, with no outcome.",
		Then: "the reconciler looks it up once, as for `send_unknown`.",
	},
}

// fits says whether the runbook of reason offers action.
func fits(reason ledger.Reason, action string) bool {
	for _, a := range runbook[reason].Fits {
		if a == action {
			return true
		}
	}
	return false
}

// runbookHTML shows runbook text with its backquoted names as code.
func runbookHTML(s string) template.HTML {
	var b strings.Builder
	for i, part := range strings.Split(s, "`") {
		if i%2 == 1 {
			b.WriteString("<code>" + template.HTMLEscapeString(part) + "</code>")
		} else {
			b.WriteString(template.HTMLEscapeString(part))
		}
	}
	return template.HTML(b.String())
}

// RunbookMarkdown is the runbook's sections for the reasons of state, as docs/operators.md holds
// them between its "runbook:STATE" markers.
func RunbookMarkdown(state ledger.State) string {
	var b strings.Builder
	for _, r := range runbookOrder {
		rule, _ := r.Rule()
		if rule.State != state {
			continue
		}
		e := runbook[r]
		fmt.Fprintf(&b, "\n### `%s`\n\n", r)
		para := e.What
		if e.Check != "" {
			para += " **Check** " + e.Check
		}
		para += " **Then** " + e.Then
		b.WriteString(wrap(para, 100))
		if len(e.Fits) > 0 {
			names := make([]string, len(e.Fits))
			for i, a := range e.Fits {
				names[i] = "**" + fitTitles[a] + "**"
			}
			b.WriteString("\n\nIn the console: " + strings.Join(names, ", ") + ".\n")
		} else {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// wrap breaks s into lines of at most width characters, at spaces.
func wrap(s string, width int) string {
	var b strings.Builder
	line := 0
	for i, w := range strings.Fields(s) {
		n := len([]rune(w))
		if i > 0 && line+1+n > width {
			b.WriteByte('\n')
			line = 0
		} else if i > 0 {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(w)
		line += n
	}
	return b.String()
}
