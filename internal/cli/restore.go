package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

const restoreAbout = `After the ledger was restored from a backup taken at TIME (RFC 3339), and BEFORE any worker
starts (no dispatcher may start until it finished): replays ATMOST_EVENTS and brings every
intent whose stream history is ahead of the restored ledger up to it, one guarded ledger
operation per intent, with the operator as actor (docs/design.md#the-restore-protocol):

  published on the stream                            -> published      (restore_published)
  authorized on the stream, outcome unknown there    -> indeterminate  (restore_ahead; reconciled by one lookup)
  authorized on the stream, then steps the ledger lost -> parked       (restore_parked)
  never authorized since the ledger's point, pending -> pending        (restore_resumed)
  anything else                                      -> parked         (restore_parked)

An intent the restored ledger lacks (created after the backup) is recreated in that state from
its envelope on ATMOST_INTENTS. When its envelope is gone (or its account), it is listed for a
human, its delivery key is blocked (a producer publishing it again gets a duplicate), and the
command exits 1.

The replay is complete when it read, with no message missing, every event from a witness on:
of the attempts the restored ledger holds published, the one whose evidence records the
highest stream sequence JetStream named when it acknowledged the attempt's authorized event
(the dispatcher sends only after that acknowledgement, so the message there was stored before
the backup, and everything the backup lacks came after it). The message at that sequence must
still be that very event. No clock decides it. A ledger backed up before atmost recorded that
sequence names none: then the whole stream is read, and the witness is the first copy of an
authorized event the ledger holds published (the command says so).

It refuses, changing nothing, when it cannot prove the replay complete: the witness's message
gone from the stream or another one there, or, without a recorded witness, none on the stream
(events after the backup may have aged out or been removed, or the stream was recreated); a
message missing after the witness; an intent whose transitions ahead of the ledger are not all
in the replay, a read that stops before the stream's last event, or events it cannot read
(name them; --skip-unreadable goes on without them and exits 1); and TIME later than the newest history
row of the restored ledger (TIME must be at or before the backup). The current epoch must have
begun after the restored data (after its newest history row and every other epoch) and carry
no history or stream event yet: bump it (atmost epoch bump), or pass --bump-epoch. --dry-run
changes nothing and prints what would change. Running it again changes nothing.
`

// replayReading is how the replay reads: the batch size, how long one fetch waits, and how long
// it goes on trying while no message arrives before it gives up (fail closed).
var replayReading = struct {
	batch    int
	maxWait  time.Duration
	patience time.Duration
}{batch: 256, maxWait: 2 * time.Second, patience: 30 * time.Second}

// restoreFlags are the flags of `atmost restore reconcile`.
type restoreFlags struct {
	since, natsURL               string
	dryRun, bump, skipUnreadable bool
}

func restoreCommand() *Command {
	var fl restoreFlags
	return &Command{Name: "restore", Summary: "restore reconcile --since T: after a ledger restore, bring it up to ATMOST_EVENTS before any worker starts",
		About: restoreAbout,
		Subs: []*Command{{Name: "reconcile", Summary: "bring the restored ledger up to ATMOST_EVENTS",
			Synopsis: []string{"--since TIME [--dry-run] [--bump-epoch --reason TEXT] [--skip-unreadable] [--operator NAME] [--nats-url URL] [--database-url URL] [--json]"},
			Flags: func(f *Flags) {
				f.String(&fl.since, "since", "TIME", "", "the time the backup was taken (RFC 3339), or earlier: the epoch checks take it as the backup's time").
					Required("the time the backup was taken, e.g. 2026-01-02T02:00:00Z")
				f.Bool(&fl.dryRun, "dry-run", "change nothing, print what would change")
				f.Bool(&fl.bump, "bump-epoch", "bump the restore epoch first (requires --reason)")
				f.String(&f.c.reason, "reason", "TEXT", "", "with --bump-epoch: why, written to the control history")
				f.Bool(&fl.skipUnreadable, "skip-unreadable", "go on without the events it cannot read, list them and exit 1")
				f.Operator()
				f.String(&fl.natsURL, "nats-url", "URL", DefaultNATSURL, "the NATS server holding ATMOST_EVENTS").Env("ATMOST_NATS_URL")
				f.Ledger("the restored ledger")
				f.JSON("print the report as JSON")
			},
			Run: func(ctx context.Context, c *line) int {
				return restoreReconcile(ctx, c, fl)
			},
		}},
	}
}

func restoreReconcile(ctx context.Context, c *line, fl restoreFlags) int {
	io := c.io
	var code int
	from, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(fl.since))
	if err != nil {
		return c.usageError("--since %q: give an RFC 3339 time, e.g. 2026-01-02T02:00:00Z", fl.since)
	}
	if from.After(time.Now()) {
		return c.usageError("--since %s is in the future", timestamp(from))
	}
	if fl.bump && fl.dryRun {
		return c.usageError("--bump-epoch and --dry-run: a dry run changes nothing; leave one out")
	}
	var operator, reason string
	if fl.bump {
		if operator, reason, code = c.change(); code != ExitOK {
			return code
		}
	} else if operator, err = operatorName(io, c.operator); err != nil {
		return c.usageError("%v", err)
	}
	refuse := func(format string, args ...any) int {
		return c.refused("nothing was changed: %s", fmt.Sprintf(format, args...))
	}

	l, closeLedger, err := openLedger(ctx, c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()

	// T must be at or before the backup: the epoch checks take it as the backup's time. The
	// newest history row the restored ledger holds is a lower bound on the backup time, on the
	// same database clock, so a T after it may be after the backup. The replay does not rest on
	// T (provenReplay).
	pt, err := l.RestorePoint(ctx)
	if err != nil {
		return c.fail(err)
	}
	if pt.NewestHistoryAt.IsZero() {
		return refuse("the restored ledger holds no history, so nothing bounds the backup time from below and --since %s cannot be checked", timestamp(from))
	}
	if from.After(pt.NewestHistoryAt) {
		return refuse("--since %s is later than the newest history row of the restored ledger (%s), so it may be later than the backup: give the backup time or earlier (earlier is always safe)",
			timestamp(from), timestamp(pt.NewestHistoryAt))
	}
	// The restore protocol: the epoch first, so that no worker of the old epoch can claim or
	// complete anything on the restored ledger.
	if !fl.bump {
		if msg := epochProblem(pt, from); msg != "" {
			if !fl.dryRun {
				return refuse("%s", msg)
			}
			c.note("warning: %s", msg)
		}
	}

	nc, err := connectNATS(fl.natsURL)
	if err != nil {
		return c.fail(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return c.fail(err)
	}
	replay, err := provenReplay(ctx, c, js, l)
	if err != nil {
		return refuse("%v", err)
	}
	if len(replay.unreadable) > 0 {
		list := unreadableList(replay.unreadable)
		if !fl.skipUnreadable {
			return refuse("%d events on %s cannot be read, so the replay cannot prove what happened to their intents: %s (--skip-unreadable goes on without them, and exits 1)",
				len(replay.unreadable), events.EventsStream, list)
		}
		c.note("warning: skipping %d unreadable events (--skip-unreadable): %s", len(replay.unreadable), list)
	}
	keys := make([]identity.DeliveryKey, 0, len(replay.histories))
	for k := range replay.histories {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b identity.DeliveryKey) int { return strings.Compare(a.String(), b.String()) })
	held, err := l.GetMany(ctx, keys)
	if err != nil {
		return c.fail(err)
	}
	missing := map[identity.DeliveryKey]*ledger.StreamHistory{}
	var gaps []string
	for _, k := range keys {
		h := replay.histories[k]
		point, where := int64(0), "not in the ledger"
		if in, ok := held[k]; ok {
			point, where = in.Seq, fmt.Sprintf("ledger at %d", in.Seq)
		} else {
			missing[k] = h
		}
		if lacks := firstLacking(h.Transitions, point); lacks > 0 {
			gaps = append(gaps, fmt.Sprintf("%s (%s, the replay lacks %d of the %d the stream reaches)", k, where, lacks, h.Transitions[len(h.Transitions)-1].Seq))
		}
	}
	if len(gaps) > 0 {
		return refuse("%d intents have transitions ahead of the ledger that the replay does not hold (removed from the stream, or unreadable), so what happened to them is unknown: %s",
			len(gaps), shortList(gaps))
	}
	if fl.bump {
		if _, err := l.BumpEpoch(ctx, ledger.Actor{Name: operator, Reason: reason}); err != nil {
			return c.fail(err)
		}
		if pt, err = l.RestorePoint(ctx); err != nil {
			return c.fail(err)
		}
		c.note("epoch bumped to %d", pt.Epoch.Epoch)
		if msg := epochProblem(pt, from); msg != "" {
			return refuse("%s", msg)
		}
	}
	// A worker of the current epoch or a later one already worked (the stream says so): the
	// epoch was not bumped past what the live system used, so a fence a live worker holds may
	// be handed out again.
	if replay.maxEpoch >= pt.Epoch.Epoch {
		msg := fmt.Sprintf("%s shows transitions of epoch %d, and the current epoch is %d: bump the epoch past %d before any worker reconnects",
			events.EventsStream, replay.maxEpoch, pt.Epoch.Epoch, replay.maxEpoch)
		if !fl.dryRun {
			return refuse("%s", msg)
		}
		c.note("warning: %s", msg)
	}
	envelopes := 0
	if len(missing) > 0 {
		if envelopes, err = findEnvelopes(ctx, js, missing); err != nil {
			return refuse("%v", err)
		}
	}

	report := restoreReport{Since: from, DryRun: fl.dryRun, Epoch: pt.Epoch.Epoch, Events: replay.events, Intents: len(keys),
		FromSequence: replay.first, ToSequence: replay.last, WholeStream: replay.whole, Witness: replay.witness, WitnessRecorded: replay.recorded,
		Missing: len(missing), EnvelopesFound: envelopes, Unreadable: replay.unreadable, Totals: map[string]int{}}
	detail := map[string]any{"since": timestamp(from), "command": "atmost restore reconcile", "epoch": pt.Epoch.Epoch}
	for _, k := range keys {
		res, err := l.Restore(ctx, *replay.histories[k], operator, detail, fl.dryRun)
		if err != nil {
			return c.fail(err)
		}
		report.Totals[string(res.Verdict)]++
		if res.Changes() {
			report.Totals["to "+string(res.To)]++
		}
		if res.Changes() || res.Verdict.NeedsHuman() {
			report.Results = append(report.Results, res)
		}
		if res.Verdict.NeedsHuman() {
			report.NeedsHuman++
		}
	}
	if c.asJSON {
		if code := writeJSON(io, report); code != ExitOK {
			return code
		}
	} else {
		report.print(io)
	}
	var unfinished []string
	if report.NeedsHuman > 0 {
		blocked := "their delivery keys are blocked: a producer publishing one again gets a duplicate"
		if fl.dryRun {
			blocked = "a run without --dry-run blocks their delivery keys"
		}
		unfinished = append(unfinished, fmt.Sprintf("%d intents the stream knows are not in the ledger and could not be recreated: a human must decide each (%s)", report.NeedsHuman, blocked))
	}
	if len(replay.unreadable) > 0 {
		unfinished = append(unfinished, fmt.Sprintf("%d unreadable events were skipped (--skip-unreadable): their intents may be behind the stream: %s", len(replay.unreadable), unreadableList(replay.unreadable)))
	}
	if len(unfinished) > 0 {
		return c.problem(ExitError, strings.Join(unfinished, "; and "))
	}
	return ExitOK
}

// epochProblem says why the current epoch does not prove it was bumped after the restore, or
// "" when it does: it must have begun after the newest history row of the restored data, after
// every other epoch, and after T, and no history row may carry it yet (a dispatcher of the
// new epoch already worked, before the reconcile finished).
func epochProblem(pt ledger.RestorePoint, from time.Time) string {
	e := pt.Epoch
	switch {
	case !e.At.After(from):
		return fmt.Sprintf("the current epoch %d began at %s, not after --since %s: bump it before any worker reconnects (atmost epoch bump --reason ..., or --bump-epoch here)",
			e.Epoch, timestamp(e.At), timestamp(from))
	case !e.At.After(pt.NewestHistoryAt):
		return fmt.Sprintf("the current epoch %d began at %s, before the newest history row of the restored ledger (%s): it is the backup's, not bumped after the restore; bump it before any worker reconnects (atmost epoch bump --reason ..., or --bump-epoch here)",
			e.Epoch, timestamp(e.At), timestamp(pt.NewestHistoryAt))
	case !pt.OtherEpochsAt.IsZero() && !e.At.After(pt.OtherEpochsAt):
		return fmt.Sprintf("the current epoch %d began at %s, not after the epoch before it (%s): bump it before any worker reconnects",
			e.Epoch, timestamp(e.At), timestamp(pt.OtherEpochsAt))
	case pt.CurrentEpochHistory > 0:
		return fmt.Sprintf("%d history rows already carry the current epoch %d: a dispatcher of this epoch worked before the reconcile finished; stop every worker, bump the epoch and run it again",
			pt.CurrentEpochHistory, e.Epoch)
	}
	return ""
}

// unreadableEvent is a message on ATMOST_EVENTS the replay cannot read as an event.
type unreadableEvent struct {
	Subject  string `json:"subject"`
	Sequence uint64 `json:"sequence"`
	Error    string `json:"error"`
}

func unreadableList(u []unreadableEvent) string {
	items := make([]string, len(u))
	for i, e := range u {
		items[i] = fmt.Sprintf("%s seq %d (%s)", e.Subject, e.Sequence, e.Error)
	}
	return shortList(items)
}

// shortList joins the first 20 items and counts the rest.
func shortList(items []string) string {
	const most = 20
	if len(items) <= most {
		return strings.Join(items, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(items[:most], "; "), len(items)-most)
}

type restoreReport struct {
	Since  time.Time `json:"since"`
	DryRun bool      `json:"dry_run"`
	Epoch  int64     `json:"epoch"`
	Events int       `json:"events"`
	// FromSequence and ToSequence are the stream sequences the replay read; WholeStream says
	// the stream was read from its first message. WitnessRecorded says the witness is the one
	// the restored ledger records (read from its sequence on); false: the ledger records none,
	// and the witness is the first copy of an authorized event the whole stream holds.
	FromSequence    uint64                 `json:"from_sequence"`
	ToSequence      uint64                 `json:"to_sequence"`
	WholeStream     bool                   `json:"whole_stream"`
	Witness         ledger.StreamPosition  `json:"witness"`
	WitnessRecorded bool                   `json:"witness_recorded"`
	Intents         int                    `json:"intents"`
	Missing         int                    `json:"missing_from_ledger"`
	EnvelopesFound  int                    `json:"envelopes_found"`
	NeedsHuman      int                    `json:"needs_human"`
	Unreadable      []unreadableEvent      `json:"unreadable,omitempty"`
	Totals          map[string]int         `json:"totals"`
	Results         []ledger.RestoreResult `json:"results"`
}

func (r restoreReport) print(io IO) {
	if len(r.Results) > 0 {
		w := tabwriter.NewWriter(io.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "KEY\tLEDGER\t\tSTREAM\t\tNEW")
		for _, res := range r.Results {
			ledgerSide := fmt.Sprintf("%d %s", res.LedgerSeq, res.LedgerState)
			if res.LedgerState == "" {
				ledgerSide = "(missing)"
			}
			to := fmt.Sprintf("%s (%s)", res.To, res.Reason)
			if !res.Changes() {
				to = "NOT RECREATED: " + string(res.Verdict)
			} else if res.Verdict == ledger.RestoreCreated {
				to += ", recreated"
			}
			fmt.Fprintf(w, "%s\t%s\t->\t%d %s\t->\t%s\n", res.Key, ledgerSide, res.StreamSeq, res.StreamState, to)
		}
		_ = w.Flush()
	}
	moved := r.Totals[string(ledger.RestoreMoved)] + r.Totals[string(ledger.RestoreCreated)]
	verb := "changed"
	if r.DryRun {
		verb = "would change"
	}
	if r.WitnessRecorded {
		fmt.Fprintf(io.Stdout, "replayed %d events of %d intents, %s sequences %d to %d (epoch %d), from the witness at sequence %d: %s seq %d, authorized by attempt %s, which JetStream acknowledged there before the send the restored ledger holds published\n",
			r.Events, r.Intents, events.EventsStream, r.FromSequence, r.ToSequence, r.Epoch, r.Witness.StreamSeq, r.Witness.Key, r.Witness.Seq, r.Witness.Attempt)
	} else {
		fmt.Fprintf(io.Stdout, "replayed %d events of %d intents, %s sequences %d to %d (epoch %d), the whole stream: the restored ledger records no witness sequence; it reaches back past %s seq %d at sequence %d, the first copy of an authorized event the restored ledger holds published\n",
			r.Events, r.Intents, events.EventsStream, r.FromSequence, r.ToSequence, r.Epoch, r.Witness.Key, r.Witness.Seq, r.Witness.StreamSeq)
	}
	fmt.Fprintf(io.Stdout, "%s %d: published %d, indeterminate %d, pending %d, parked %d (recreated %d of %d missing from the ledger; %d envelopes found)\n",
		verb, moved, r.Totals["to published"], r.Totals["to indeterminate"], r.Totals["to pending"], r.Totals["to parked"],
		r.Totals[string(ledger.RestoreCreated)], r.Missing, r.EnvelopesFound)
	fmt.Fprintf(io.Stdout, "unchanged: %d not behind the stream, %d already published; needing a human: %d\n",
		r.Totals[string(ledger.RestoreNotBehind)], r.Totals[string(ledger.RestorePublishedAlready)], r.NeedsHuman)
	if r.DryRun {
		fmt.Fprintln(io.Stdout, "dry run: nothing was changed")
	} else if moved > 0 {
		fmt.Fprintln(io.Stdout, "their events are published by the first relay round of a role (start ingest or the sweeper first)")
	}
}

type replayed struct {
	histories map[identity.DeliveryKey]*ledger.StreamHistory
	events    int
	// maxEpoch is the highest epoch a replayed transition carries.
	maxEpoch   int64
	unreadable []unreadableEvent
	// first and last are the stream sequences read; whole says the read began at the stream's
	// first message.
	first, last uint64
	whole       bool
	// intact is the stream sequence from which on the read missed no message (the first after
	// the last one missing, or first).
	intact uint64
	// authorized are the first copies of the authorized events read from intact on, the
	// candidate witnesses of a ledger that records none; witness is the replay's witness, and
	// recorded says it is the one the ledger records (provenReplay).
	authorized []ledger.StreamPosition
	witness    ledger.StreamPosition
	recorded   bool
}

// provenReplay reads ATMOST_EVENTS from the restored ledger's witness to the stream's last
// message and refuses when it cannot prove that read complete. The witness
// (Ledger.RecordedWitness) is the message at the stream sequence JetStream named when it
// acknowledged an authorized event the restored ledger holds published: it was stored before
// the backup, and every transition the backup lacks was stored after it, so a read that
// missed no message from it to the stream's last holds every one of them. The stream must
// still hold that very event there (witnessHeld): a stream recreated since, or a mirror, may
// hold another. That is decided by the stream's order and the ledger's own records alone: the
// database's clock and the NATS server's are never compared.
//
// A ledger that records no witness (backed up before atmost recorded it) is read from the
// stream's first message, and its witness is the first copy of an authorized event that the
// ledger holds published, by that attempt (Ledger.RestoreWitness): the copy JetStream
// acknowledged before the send, while the stream still holds it.
func provenReplay(ctx context.Context, c *line, js jetstream.JetStream, l *ledger.Ledger) (replayed, error) {
	stream, err := js.Stream(ctx, events.EventsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return replayed{}, fmt.Errorf("NATS has no %s stream: is ATMOST_NATS_URL the server the roles used?", events.EventsStream)
	}
	if err != nil {
		return replayed{}, fmt.Errorf("look up %s: %w", events.EventsStream, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return replayed{}, fmt.Errorf("look up %s: %w", events.EventsStream, err)
	}
	st := info.State
	if st.Msgs == 0 {
		return replayed{}, fmt.Errorf("%s holds no event, so nothing on it proves it reaches back to the backup: every transition since may have aged out (max age %s) or been removed, or the stream was recreated; the replay cannot prove what happened: restore from a newer backup",
			events.EventsStream, info.Config.MaxAge)
	}
	w, recorded, err := l.RecordedWitness(ctx)
	if err != nil {
		return replayed{}, err
	}
	if recorded {
		if err := witnessHeld(ctx, stream, w, info.Config.MaxAge); err != nil {
			return replayed{}, err
		}
		replay, err := replayEvents(ctx, stream, st.LastSeq, w.StreamSeq)
		if err != nil {
			return replay, err
		}
		if replay.first != w.StreamSeq || replay.intact != w.StreamSeq {
			return replay, fmt.Errorf("a message of %s after the witness at sequence %d is missing (the read went on at %d): it was removed, and what it held is unknown; the replay cannot prove what happened: restore from a newer backup",
				events.EventsStream, w.StreamSeq, max(replay.first, replay.intact))
		}
		replay.witness, replay.recorded = w, true
		return replay, nil
	}
	c.note("the restored ledger records no witness sequence (it was backed up before atmost recorded one): reading %s from its first event; the witness is the first copy of an authorized event the ledger holds published, which proves the replay complete only while the stream still holds the copy JetStream acknowledged before the send (docs/design.md#the-restore-protocol)",
		events.EventsStream)
	replay, err := replayEvents(ctx, stream, st.LastSeq, 0)
	if err != nil {
		return replay, err
	}
	ok, err := replay.prove(ctx, l)
	if err != nil || ok {
		return replay, err
	}
	from := fmt.Sprintf("from its first event (sequence %d)", replay.first)
	if replay.intact > replay.first {
		from = fmt.Sprintf("from sequence %d, the first after a message missing from it", replay.intact)
	}
	return replay, fmt.Errorf("%s holds, %s, no authorized event that the restored ledger holds published, so nothing on it is proven to predate the backup: transitions after the backup may have aged out (max age %s) or been removed, or the stream was recreated after it; the replay cannot prove what happened: restore from a newer backup",
		events.EventsStream, from, info.Config.MaxAge)
}

// witnessHeld requires the message at the witness's stream sequence to be the very
// authorized event JetStream acknowledged there: that intent's transition, by that attempt.
// A stream recreated after the backup numbers its messages anew, and a mirror numbers its
// own, so another message at that sequence proves nothing about the backup.
func witnessHeld(ctx context.Context, stream jetstream.Stream, w ledger.StreamPosition, maxAge time.Duration) error {
	what := fmt.Sprintf("the authorized event of %s seq %d (attempt %s), which JetStream acknowledged at sequence %d before the send the restored ledger holds published",
		w.Key, w.Seq, w.Attempt, w.StreamSeq)
	msg, err := stream.GetMsg(ctx, w.StreamSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("%s no longer holds %s: it aged out (max age %s) or was removed, or the stream was recreated after the backup, so what happened after the backup may be gone; the replay cannot prove what happened: restore from a newer backup",
			events.EventsStream, what, maxAge)
	}
	if err != nil {
		return fmt.Errorf("read %s sequence %d: %w", events.EventsStream, w.StreamSeq, err)
	}
	if !isWitness(msg, w) {
		return fmt.Errorf("%s holds at sequence %d another message than %s: the stream was recreated after the backup, or ATMOST_NATS_URL is not the server the roles published to (a mirror numbers its messages on its own); the replay cannot prove what happened: restore from a newer backup",
			events.EventsStream, w.StreamSeq, what)
	}
	return nil
}

// isWitness reports whether msg is w's authorized event, at w's stream sequence.
func isWitness(msg *jetstream.RawStreamMsg, w ledger.StreamPosition) bool {
	e, err := events.Unmarshal(msg.Data)
	return err == nil && msg.Sequence == w.StreamSeq && e.ID == events.NewID(w.Key, w.Seq) && e.DeliveryKey == w.Key && e.Seq == w.Seq &&
		e.To == ledger.Authorized && e.Attempt != nil && *e.Attempt == w.Attempt
}

// prove looks for the replay's witness among its candidates and records it.
func (r *replayed) prove(ctx context.Context, l *ledger.Ledger) (bool, error) {
	w, ok, err := l.RestoreWitness(ctx, r.authorized)
	if err != nil {
		return false, err
	}
	r.witness = w
	return ok, nil
}

// replayEvents reads ATMOST_EVENTS up to its message last (its last at the start), from the
// message at stream sequence from, or from its first message when from is 0, with an ordered
// consumer (nothing is acknowledged or left behind), and folds the transitions per intent,
// each seq once: the first copy, where a relay may have published one twice. A read that ends
// before last is an error; a message that is not an event is listed in unreadable, never
// skipped silently; a message missing from the stream (removed by hand) is noted: no
// candidate witness before it counts.
func replayEvents(ctx context.Context, stream jetstream.Stream, last, from uint64) (replayed, error) {
	out := replayed{histories: map[identity.DeliveryKey]*ledger.StreamHistory{}, whole: from == 0}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.EventSubjects}, DeliverPolicy: jetstream.DeliverAllPolicy}
	if from > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	cons, err := stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return out, fmt.Errorf("read %s: %w", events.EventsStream, err)
	}
	seen := map[identity.DeliveryKey]map[int64]bool{}
	err = readStream(ctx, events.EventsStream, cons, last, func(msg jetstream.Msg, meta *jetstream.MsgMetadata) error {
		seq := meta.Sequence.Stream
		switch {
		case out.first == 0:
			out.first, out.intact = seq, seq
		case seq > out.last+1:
			// The stream holds every event subject, so a sequence skipped was removed. A
			// witness before it proves nothing about what it held.
			out.intact, out.authorized = seq, nil
		}
		out.last = seq
		e, err := events.Unmarshal(msg.Data())
		if err != nil {
			out.unreadable = append(out.unreadable, unreadableEvent{Subject: msg.Subject(), Sequence: seq, Error: err.Error()})
			return nil
		}
		h := out.histories[e.DeliveryKey]
		if h == nil {
			h = &ledger.StreamHistory{Key: e.DeliveryKey, Account: e.Account}
			out.histories[e.DeliveryKey] = h
			seen[e.DeliveryKey] = map[int64]bool{}
		}
		if seen[e.DeliveryKey][e.Seq] {
			return nil
		}
		seen[e.DeliveryKey][e.Seq] = true
		// Only a first copy may be the copy JetStream acknowledged before a send: a later one
		// was stored again after the duplicate window, possibly after the backup.
		if e.To == ledger.Authorized && e.Attempt != nil {
			out.authorized = append(out.authorized, ledger.StreamPosition{Key: e.DeliveryKey, Seq: e.Seq, Attempt: *e.Attempt, StreamSeq: seq})
		}
		out.events++
		out.maxEpoch = max(out.maxEpoch, e.Epoch)
		t := ledger.StreamTransition{Seq: e.Seq, From: e.From, To: e.To, Epoch: e.Epoch, Generation: e.Generation}
		if e.Attempt != nil {
			t.Attempt = *e.Attempt
		}
		h.Transitions = append(h.Transitions, t)
		return nil
	})
	for _, h := range out.histories {
		slices.SortFunc(h.Transitions, func(a, b ledger.StreamTransition) int { return cmp.Compare(a.Seq, b.Seq) })
	}
	return out, err
}

// firstLacking returns the first transition number after point that the replay lacks though
// the stream holds a later one (the transitions ahead of a ledger at point must be point+1,
// point+2, ... to decide on them), or 0 when it lacks none. transitions are sorted by seq,
// each once.
func firstLacking(transitions []ledger.StreamTransition, point int64) int64 {
	next := point + 1
	for _, t := range transitions {
		switch {
		case t.Seq < next:
			continue
		case t.Seq > next:
			return next
		}
		next++
	}
	return 0
}

// findEnvelopes looks for the envelopes of the intents the ledger lacks on ATMOST_INTENTS, on
// their accounts' subjects, and returns how many it found. A message that is not an envelope
// was rejected by ingest and was never an intent, so it is passed over.
func findEnvelopes(ctx context.Context, js jetstream.JetStream, missing map[identity.DeliveryKey]*ledger.StreamHistory) (int, error) {
	stream, err := js.Stream(ctx, events.IntentsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("look up %s: %w", events.IntentsStream, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("look up %s: %w", events.IntentsStream, err)
	}
	if info.State.Msgs == 0 {
		return 0, nil
	}
	accounts := map[string]bool{}
	for _, h := range missing {
		accounts[events.IntentSubject(h.Account)] = true
	}
	subjects := make([]string, 0, len(accounts))
	for s := range accounts {
		subjects = append(subjects, s)
	}
	slices.Sort(subjects)
	// The last message on those subjects at the start: the read must reach it.
	var last uint64
	for _, subject := range subjects {
		m, err := stream.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("look up %s: %w", events.IntentsStream, err)
		}
		last = max(last, m.Sequence)
	}
	if last == 0 {
		return 0, nil
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: subjects, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", events.IntentsStream, err)
	}
	found := 0
	err = readStream(ctx, events.IntentsStream, cons, last, func(msg jetstream.Msg, _ *jetstream.MsgMetadata) error {
		env, err := identity.ParseEnvelope(msg.Data())
		if err != nil {
			return nil // ingest rejected it: never an intent
		}
		if h := missing[env.DeliveryKey()]; h != nil && h.Envelope == nil && h.Account == env.Account {
			h.Envelope = &env
			found++
		}
		return nil
	})
	return found, err
}

// fetcher is the part of an ordered consumer readStream uses.
type fetcher interface {
	Fetch(batch int, opts ...jetstream.FetchOpt) (jetstream.MessageBatch, error)
}

// readStream hands every message cons delivers to fn, in stream order, until the message with
// stream sequence last (taken at the start) or a later one was delivered, as the messages'
// own metadata says. An empty fetch (a slow cluster, a leader election, an ordered consumer
// resetting) or a failed one is retried with backoff; when nothing arrives for
// replayReading.patience it returns an error: a partial replay decides nothing.
func readStream(ctx context.Context, name string, cons fetcher, last uint64, fn func(jetstream.Msg, *jetstream.MsgMetadata) error) error {
	if last == 0 {
		return nil
	}
	const firstBackoff = 20 * time.Millisecond
	var (
		delivered uint64
		lastErr   error
		backoff   = firstBackoff
		idleSince = time.Now()
	)
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
		n := 0
		batch, err := cons.Fetch(replayReading.batch, jetstream.FetchMaxWait(replayReading.maxWait))
		if err == nil {
			for msg := range batch.Messages() {
				meta, err := msg.Metadata()
				if err != nil {
					return fmt.Errorf("read %s: %w", name, err)
				}
				n++
				if meta.Sequence.Stream <= delivered {
					continue // delivered again after a reset
				}
				delivered = meta.Sequence.Stream
				if err := fn(msg, meta); err != nil {
					return err
				}
				if delivered >= last {
					return nil
				}
			}
			if err = batch.Error(); errors.Is(err, jetstream.ErrNoMessages) {
				err = nil
			}
		}
		if err != nil {
			lastErr = err
		}
		if n > 0 {
			idleSince, backoff = time.Now(), firstBackoff
			continue
		}
		if time.Since(idleSince) >= replayReading.patience {
			why := "no message arrived"
			if lastErr != nil {
				why = fmt.Sprintf("the last error: %v", lastErr)
			}
			return fmt.Errorf("read %s: the read stopped at sequence %d before the last one at the start, %d, for %s (%s): the replay is incomplete, so nothing is decided on it; run it again",
				name, delivered, last, replayReading.patience, why)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("read %s: %w", name, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}
