package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// The operator's verbs on one intent: park, resolve, retry. Each is one guarded ledger
// operation with the operator as its actor; a refusal changes nothing (except a retry at the
// attempt cap, which parks) and exits 1 with a sentence naming the intent's state.
//
// Like every transition, the change writes an outbox row in its transaction. The CLI keeps no
// NATS connection of its own by default: the event (and, for a retry, the dispatch work item)
// goes out with the next relay round of a running role (ingest's relay loop, every second by
// default, or the sweeper's next pass). When the operator names a NATS server (--nats-url or
// ATMOST_NATS_URL), the CLI publishes it right away with the relay and says so; if that fails
// the change stands and the relay still publishes it later.

const parkAbout = `Stops an intent on an operator's word: it becomes parked (operator_parked), owned by a human,
and no machine moves it on; atmost resolve ends it. Allowed from pending, failed, indeterminate,
and authorized once its worker's lease has expired; refused for a published or parked intent,
and for an authorized one whose lease is live (bytes may be leaving right now).
` + publishNote

const resolveAbout = `A human's verdict on a parked intent: --published (the object is on the platform, and
--object-id names it) or --failed (it was not sent: its text is released, and atmost retry may
send it again). --evidence says how you know; it is written to the history with you as actor.
Only a parked intent can be resolved.
` + publishNote

const retryAbout = `Reopens a failed intent: back to pending with a new work item, and no attempt row (the next
dispatcher to take it opens exactly one). Only failed proves nothing was sent, so every other
state is refused; an indeterminate intent is never retried. At the attempt cap the intent is
parked (attempts_exhausted) instead, and the command exits 1.
` + publishNote

const publishNote = `
The change writes its event to the ledger's outbox. Without a NATS server named (--nats-url or
ATMOST_NATS_URL), the event is published by the next relay round of a running role (ingest,
every second; the sweeper, every pass). With one, it is published right away.
`

// changeJSON is what park, resolve and retry print with --json.
type changeJSON struct {
	Key      string        `json:"key"`
	From     ledger.State  `json:"from,omitempty"` // park: any state it may leave
	State    ledger.State  `json:"state"`
	Reason   ledger.Reason `json:"reason"`
	Actor    string        `json:"actor"`
	Note     string        `json:"note"`
	ObjectID string        `json:"object_id,omitempty"`
	// Event is "published" when the CLI published the change's event itself, "outbox" when
	// the next relay round will.
	Event      string `json:"event"`
	EventError string `json:"event_error,omitempty"`
}

// verb declares park, resolve or retry: KEY, the verb's own flags, then the flags they share;
// run gets the key.
func verb(name, summary, about string, own func(f *Flags), run func(ctx context.Context, v *verbLine) int) *Command {
	v := &verbLine{}
	return &Command{Name: name, Summary: summary, About: about, Args: []string{"KEY"},
		Flags: func(f *Flags) {
			own(f)
			f.Operator()
			f.String(&v.natsURL, "nats-url", "URL", "", "publish the change's event right away on this NATS server (empty: the next relay round publishes it)").Env("ATMOST_NATS_URL")
			f.Ledger("the ledger database")
			f.JSON("print the change as JSON")
		},
		Run: func(ctx context.Context, c *line) int {
			v.line = c
			var code int
			if v.key, code = c.key(c.args[0]); code != ExitOK {
				return code
			}
			return run(ctx, v)
		},
	}
}

// verbLine is the parsed command line of park, resolve or retry.
type verbLine struct {
	*line
	key     identity.DeliveryKey
	natsURL string
}

func parkCommand() *Command {
	return verb("park", "park KEY --reason R: stop an intent; a human owns it from then on", parkAbout,
		func(f *Flags) { f.Reason("why, written to the history") },
		func(ctx context.Context, v *verbLine) int {
			operator, reason, code := v.change()
			if code != ExitOK {
				return code
			}
			return v.apply(ctx, changeJSON{State: ledger.Parked, Reason: ledger.ReasonOperatorParked, Actor: operator, Note: reason},
				func(l *ledger.Ledger) error { return l.Park(ctx, v.key, ledger.Actor{Name: operator, Reason: reason}) })
		})
}

func resolveCommand() *Command {
	var published, failed bool
	var objectID, evidence string
	cmd := verb("resolve", "resolve KEY --published --object-id ID | --failed, --evidence E: a human's verdict on a parked intent", resolveAbout,
		func(f *Flags) {
			f.Bool(&published, "published", "the object is on the platform (give --object-id)")
			f.String(&objectID, "object-id", "ID", "", "with --published: the platform's id of the object")
			f.Bool(&failed, "failed", "it was not sent")
			f.String(&evidence, "evidence", "TEXT", "", "how you know, written to the history").
				Required("say how you know (a link, what the platform answered), for the history")
		},
		func(ctx context.Context, v *verbLine) int {
			ch := changeJSON{From: ledger.Parked, ObjectID: strings.TrimSpace(objectID), Note: strings.TrimSpace(evidence)}
			switch {
			case published == failed:
				return v.usageError("give --published or --failed: the verdict on the parked intent")
			case published && ch.ObjectID == "":
				return v.usageError("--published needs --object-id: the platform's id of the object you found")
			case failed && v.given("object-id"):
				return v.usageError("--object-id and --failed contradict each other: an intent that was not sent has no object")
			}
			if err := ledger.CheckNote("--evidence", ch.Note); err != nil {
				return v.usageError("%v", err)
			}
			ch.State, ch.Reason = ledger.Published, ledger.ReasonOperatorPublished
			if failed {
				ch.State, ch.Reason = ledger.Failed, ledger.ReasonOperatorFailed
			}
			operator, err := operatorName(v.io, v.operator)
			if err != nil {
				return v.usageError("%v", err)
			}
			ch.Actor = operator
			return v.apply(ctx, ch, func(l *ledger.Ledger) error {
				return l.Resolve(ctx, v.key, ch.State, ch.ObjectID, ledger.Actor{Name: operator, Reason: ch.Note})
			})
		})
	cmd.Synopsis = []string{
		"KEY --published --object-id ID --evidence TEXT [--operator NAME] [--nats-url URL] [--database-url URL] [--json]",
		"KEY --failed --evidence TEXT [--operator NAME] [--nats-url URL] [--database-url URL] [--json]",
	}
	return cmd
}

func retryCommand() *Command {
	return verb("retry", "retry KEY --reason R: reopen a failed intent (only failed: nothing was sent)", retryAbout,
		func(f *Flags) { f.Reason("why, written to the history") },
		func(ctx context.Context, v *verbLine) int {
			operator, reason, code := v.change()
			if code != ExitOK {
				return code
			}
			return v.apply(ctx, changeJSON{From: ledger.Failed, State: ledger.Pending, Reason: ledger.ReasonRetried, Actor: operator, Note: reason},
				func(l *ledger.Ledger) error {
					return l.RetryAs(ctx, v.key, ledger.Actor{Name: operator, Reason: reason})
				})
		})
}

// apply makes the change, publishes its event when a NATS server is named, and reports.
func (v *verbLine) apply(ctx context.Context, ch changeJSON, change func(l *ledger.Ledger) error) int {
	l, closeLedger, err := openLedger(ctx, v.databaseURL)
	if err != nil {
		return v.fail(err)
	}
	defer closeLedger()
	ch.Key = v.key.String()
	err = change(l)
	var refusal *ledger.RefusedError
	refused := errors.As(err, &refusal)
	exhausted := refused && errors.Is(err, ledger.ErrAttemptsExhausted)
	switch {
	case err != nil && !refused:
		return v.fail(err)
	case refused && !exhausted:
		return v.refused("%s", refusedSentence(v.name, v.key, refusal))
	}
	if exhausted {
		ch.State, ch.Reason = ledger.Parked, ledger.ReasonAttemptsExhausted
	}

	ch.Event = "outbox"
	if url := strings.TrimSpace(v.natsURL); url != "" {
		if err := publishNow(ctx, l, url, v.key); err != nil {
			ch.EventError = err.Error()
			v.note("the change is made, but publishing its event failed: %v (it stays in the outbox: the next relay round publishes it)", err)
		} else {
			ch.Event = "published"
		}
	}

	if exhausted {
		// The ledger changed, but not as asked: the JSON says what happened, stderr why.
		if v.asJSON {
			_ = writeJSON(v.io, ch)
		}
		return v.refused("%s", refusedSentence(v.name, v.key, refusal))
	}
	if v.asJSON {
		return writeJSON(v.io, ch)
	}
	what := string(ch.State)
	if ch.From != "" {
		what = fmt.Sprintf("%s -> %s", ch.From, ch.State)
	}
	if ch.ObjectID != "" {
		what += ", object " + ch.ObjectID
	}
	fmt.Fprintf(v.io.Stdout, "%s: %s (%s, by %s: %s)\n", ch.Key, what, ch.Reason, ch.Actor, ch.Note)
	if ch.Event == "published" {
		fmt.Fprintln(v.io.Stdout, "its event is published on ATMOST_EVENTS")
	} else {
		fmt.Fprintln(v.io.Stdout, "the event is published by the next relay round (a running ingest or sweeper drains the outbox)")
	}
	return ExitOK
}

// refusedSentence says why the ledger refused an operator's change of key, naming the state
// the intent is in and what to do instead. A retry at the attempt cap parked the intent.
func refusedSentence(name string, key identity.DeliveryKey, r *ledger.RefusedError) string {
	state := r.State
	switch {
	case errors.Is(r.Err, ledger.ErrNotFound):
		return fmt.Sprintf("no intent has the delivery key %s (atmost intents ls lists them); nothing was changed", key)
	case errors.Is(r.Err, ledger.ErrAttemptsExhausted):
		return fmt.Sprintf("%s has reached its attempt cap, so it was parked (attempts_exhausted) instead of retried; raise the cap (atmost policy set --attempt-cap) and resolve it, or leave it parked", key)
	case errors.Is(r.Err, ledger.ErrLeaseLive):
		return fmt.Sprintf("%s is authorized and its worker's lease is live: bytes may be leaving right now, so it cannot be parked; its outcome, or its lease's expiry into indeterminate, comes first: park it then. Nothing was changed", key)
	}
	switch {
	case state == ledger.Published:
		return fmt.Sprintf("%s is published: the platform holds it, and a published intent never moves again; nothing was changed", key)
	case strings.HasSuffix(name, " park") && state == ledger.Parked:
		return fmt.Sprintf("%s is already parked: end it with atmost resolve; nothing was changed", key)
	case strings.HasSuffix(name, " resolve"):
		return fmt.Sprintf("%s is %s, not parked: only a parked intent is resolved by an operator (atmost park it first); nothing was changed", key, state)
	case state == ledger.Indeterminate:
		return fmt.Sprintf("%s is indeterminate: its outcome is unknown, so it is never retried (a resend could deliver it twice); the reconciler looks it up once, or park it and resolve it with evidence. Nothing was changed", key)
	case state == ledger.Parked:
		return fmt.Sprintf("%s is parked: a human owns it; if it was not sent, resolve it --failed with evidence first, then retry. Nothing was changed", key)
	case state == ledger.Pending || state == ledger.Authorized:
		return fmt.Sprintf("%s is %s: it is already on its way, and only a failed intent can be retried; nothing was changed", key, state)
	}
	return fmt.Sprintf("%s is %s: %v; nothing was changed", key, state, r.Err)
}

// publishNow publishes the outbox rows of key with the relay, as the role that made a change
// does after its commit.
func publishNow(ctx context.Context, l *ledger.Ledger, url string, key identity.DeliveryKey) error {
	nc, err := connectNATS(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return relay.New(l, js, relay.Config{AckTimeout: 10 * time.Second}).AfterCommit(ctx, []identity.DeliveryKey{key})
}
