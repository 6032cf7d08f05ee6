package cli

import (
	"context"
	"errors"
	"flag"
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

func init() {
	commands["restore"] = command{"restore reconcile --since T: after a ledger restore, bring it up to ATMOST_EVENTS before any worker starts", runRestore}
}

const restoreUsage = `Usage:
  atmost restore reconcile --since TIME [--dry-run] [--bump-epoch --reason TEXT] [--skip-unreadable] [--operator NAME] [--nats-url URL] [--json]

After the ledger was restored from a backup taken at TIME (RFC 3339), and BEFORE any worker
starts (no dispatcher may start until it finished): replays ATMOST_EVENTS from TIME and brings
every intent whose stream history is ahead of the restored ledger up to it, one guarded ledger
operation per intent, with the operator as actor (README, "Fencing and the restore protocol"):

  published on the stream                            -> published      (restore_published)
  authorized on the stream, outcome unknown there    -> indeterminate  (restore_ahead; reconciled by one lookup)
  authorized on the stream, then steps the ledger lost -> parked       (restore_parked)
  never authorized since the ledger's point, pending -> pending        (restore_resumed)
  anything else                                      -> parked         (restore_parked)

An intent the restored ledger lacks (created after the backup) is recreated in that state from
its envelope on ATMOST_INTENTS. When its envelope is gone (or its account), it is listed for a
human, its delivery key is blocked (a producer publishing it again gets a duplicate), and the
command exits 1.

It refuses, changing nothing, when it cannot prove the replay complete: TIME later than the
newest history row of the restored ledger (TIME must be at or before the backup), an intent
whose replay starts after a gap, events that aged out of the stream or a stream created after
TIME, a read that stops before the stream's last event, or events it cannot read (name them;
--skip-unreadable goes on without them and exits 1). The current epoch must have begun after
the restored data (after its newest history row and every other epoch) and carry no history
or stream event yet: bump it (atmost epoch bump), or pass --bump-epoch. --dry-run changes
nothing and prints what would change. Running it again changes nothing.
`

// replayReading is how readStream reads: the batch size, how long one fetch waits, and how long
// it goes on trying while no message arrives before it gives up (fail closed).
var replayReading = struct {
	batch    int
	maxWait  time.Duration
	patience time.Duration
}{batch: 256, maxWait: 2 * time.Second, patience: 30 * time.Second}

func runRestore(ctx context.Context, io IO, args []string) int {
	var since, natsURL *string
	var dryRun, bump, skipUnreadable *bool
	c, _, code, done := parseControl(io, "restore", restoreUsage, args,
		map[string][]string{"reconcile": {"since", "dry-run", "bump-epoch", "reason", "operator", "nats-url", "skip-unreadable"}}, func(fs *flag.FlagSet) {
			since = fs.String("since", "", "reconcile: the time the backup was taken (RFC 3339); the replay starts there")
			dryRun = fs.Bool("dry-run", false, "reconcile: change nothing, print what would change")
			bump = fs.Bool("bump-epoch", false, "reconcile: bump the restore epoch first (requires --reason)")
			skipUnreadable = fs.Bool("skip-unreadable", false, "reconcile: go on without the events it cannot read, list them and exit 1")
			natsURL = fs.String("nats-url", setting(io.Env, "ATMOST_NATS_URL", DefaultNATSURL), "reconcile: the NATS server holding ATMOST_EVENTS (env ATMOST_NATS_URL)")
		})
	if done {
		return code
	}
	if strings.TrimSpace(*since) == "" {
		return c.usageError("--since is required: the time the backup was taken, e.g. 2026-01-02T02:00:00Z")
	}
	from, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(*since))
	if err != nil {
		return c.usageError("--since %q: give an RFC 3339 time, e.g. 2026-01-02T02:00:00Z", *since)
	}
	if from.After(time.Now()) {
		return c.usageError("--since %s is in the future", timestamp(from))
	}
	if *bump && *dryRun {
		return c.usageError("--bump-epoch and --dry-run: a dry run changes nothing; leave one out")
	}
	var operator, reason string
	if *bump {
		if operator, reason, code = c.change(); code != ExitOK {
			return code
		}
	} else if operator, err = operatorName(io, *c.operator); err != nil {
		return c.usageError("%v", err)
	}
	refuse := func(format string, args ...any) int {
		fmt.Fprintf(io.Stderr, "%s: refused, nothing was changed: %s\n", c.name, fmt.Sprintf(format, args...))
		return ExitError
	}

	l, closeLedger, err := openLedger(ctx, *c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()

	// T must be at or before the backup. The newest history row the restored ledger holds is a
	// lower bound on the backup time: a T after it may be after the backup, and an intent whose
	// whole post-backup history lies between the backup and T would be invisible to the replay.
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
	if !*bump {
		if msg := epochProblem(pt, from); msg != "" {
			if !*dryRun {
				return refuse("%s", msg)
			}
			fmt.Fprintf(io.Stderr, "%s: warning: %s\n", c.name, msg)
		}
	}

	nc, err := connectNATS(*natsURL)
	if err != nil {
		return c.fail(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return c.fail(err)
	}
	replay, err := replayEvents(ctx, js, from)
	if err != nil {
		return refuse("%v", err)
	}
	if len(replay.unreadable) > 0 {
		list := unreadableList(replay.unreadable)
		if !*skipUnreadable {
			return refuse("%d events on %s cannot be read, so the replay cannot prove what happened to their intents: %s (--skip-unreadable goes on without them, and exits 1)",
				len(replay.unreadable), events.EventsStream, list)
		}
		fmt.Fprintf(io.Stderr, "%s: warning: skipping %d unreadable events (--skip-unreadable): %s\n", c.name, len(replay.unreadable), list)
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
		first := h.Transitions[0].Seq
		if in, ok := held[k]; ok {
			if first > in.Seq+1 {
				gaps = append(gaps, fmt.Sprintf("%s (ledger at %d, replay from %d)", k, in.Seq, first))
			}
		} else {
			missing[k] = h
			if first > 1 {
				gaps = append(gaps, fmt.Sprintf("%s (not in the ledger, replay from %d)", k, first))
			}
		}
	}
	if len(gaps) > 0 {
		return refuse("%d intents have transitions between the ledger's point and the replay's first that the replay does not hold, so what happened to them is unknown: is --since at or before the backup time? %s",
			len(gaps), shortList(gaps))
	}
	if *bump {
		if _, err := l.BumpEpoch(ctx, operator, reason); err != nil {
			return c.fail(err)
		}
		if pt, err = l.RestorePoint(ctx); err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(io.Stderr, "%s: epoch bumped to %d\n", c.name, pt.Epoch.Epoch)
		if msg := epochProblem(pt, from); msg != "" {
			return refuse("%s", msg)
		}
	}
	// A worker of the current epoch or a later one already worked after T (the stream says
	// so): the epoch was not bumped past what the live system used, so a fence a live worker
	// holds may be handed out again.
	if replay.maxEpoch >= pt.Epoch.Epoch {
		msg := fmt.Sprintf("%s shows transitions of epoch %d after --since, and the current epoch is %d: bump the epoch past %d before any worker reconnects",
			events.EventsStream, replay.maxEpoch, pt.Epoch.Epoch, replay.maxEpoch)
		if !*dryRun {
			return refuse("%s", msg)
		}
		fmt.Fprintf(io.Stderr, "%s: warning: %s\n", c.name, msg)
	}
	envelopes := 0
	if len(missing) > 0 {
		if envelopes, err = findEnvelopes(ctx, js, missing); err != nil {
			return refuse("%v", err)
		}
	}

	report := restoreReport{Since: from, DryRun: *dryRun, Epoch: pt.Epoch.Epoch, Events: replay.events, Intents: len(keys),
		Missing: len(missing), EnvelopesFound: envelopes, Unreadable: replay.unreadable, Totals: map[string]int{}}
	detail := map[string]any{"since": timestamp(from), "command": "atmost restore reconcile", "epoch": pt.Epoch.Epoch}
	for _, k := range keys {
		res, err := l.Restore(ctx, *replay.histories[k], operator, detail, *dryRun)
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
	if *c.asJSON {
		if code := writeJSON(io, report); code != ExitOK {
			return code
		}
	} else {
		report.print(io)
	}
	code = ExitOK
	if report.NeedsHuman > 0 {
		blocked := "their delivery keys are blocked: a producer publishing one again gets a duplicate"
		if *dryRun {
			blocked = "a run without --dry-run blocks their delivery keys"
		}
		fmt.Fprintf(io.Stderr, "%s: %d intents the stream knows are not in the ledger and could not be recreated: a human must decide each (%s)\n", c.name, report.NeedsHuman, blocked)
		code = ExitError
	}
	if len(replay.unreadable) > 0 {
		fmt.Fprintf(io.Stderr, "%s: %d unreadable events were skipped (--skip-unreadable): their intents may be behind the stream: %s\n", c.name, len(replay.unreadable), unreadableList(replay.unreadable))
		code = ExitError
	}
	return code
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
	Since          time.Time              `json:"since"`
	DryRun         bool                   `json:"dry_run"`
	Epoch          int64                  `json:"epoch"`
	Events         int                    `json:"events"`
	Intents        int                    `json:"intents"`
	Missing        int                    `json:"missing_from_ledger"`
	EnvelopesFound int                    `json:"envelopes_found"`
	NeedsHuman     int                    `json:"needs_human"`
	Unreadable     []unreadableEvent      `json:"unreadable,omitempty"`
	Totals         map[string]int         `json:"totals"`
	Results        []ledger.RestoreResult `json:"results"`
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
	fmt.Fprintf(io.Stdout, "replayed %d events of %d intents since %s (epoch %d)\n", r.Events, r.Intents, timestamp(r.Since), r.Epoch)
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
}

// replayEvents reads ATMOST_EVENTS from since up to its last message at the start, with an
// ordered consumer (nothing is acknowledged or left behind), and folds the transitions per
// intent, each seq once (a relay may have published one twice). It refuses when it cannot
// prove the replay complete: the stream was created after since, or messages after since may
// have aged out (the oldest message is younger than since, or every message aged out after
// since), or the read ends before the last message. A message that is not an event is listed
// in unreadable, never skipped silently.
func replayEvents(ctx context.Context, js jetstream.JetStream, since time.Time) (replayed, error) {
	out := replayed{histories: map[identity.DeliveryKey]*ledger.StreamHistory{}}
	stream, err := js.Stream(ctx, events.EventsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return out, fmt.Errorf("NATS has no %s stream: is ATMOST_NATS_URL the server the roles used?", events.EventsStream)
	}
	if err != nil {
		return out, fmt.Errorf("look up %s: %w", events.EventsStream, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return out, fmt.Errorf("look up %s: %w", events.EventsStream, err)
	}
	st := info.State
	if info.Created.After(since) {
		return out, fmt.Errorf("%s was created at %s, after --since %s: the transitions between them are not on it, so the replay cannot prove what happened",
			events.EventsStream, timestamp(info.Created), timestamp(since))
	}
	if st.FirstSeq > 1 && st.Msgs > 0 && st.FirstTime.After(since) {
		return out, fmt.Errorf("%s's oldest event is from %s, after --since %s: transitions since then may have aged out (max age %s), so the replay cannot prove what happened; restore from a newer backup",
			events.EventsStream, timestamp(st.FirstTime), timestamp(since), info.Config.MaxAge)
	}
	if st.FirstSeq > 1 && st.Msgs == 0 && !st.LastTime.Before(since) {
		return out, fmt.Errorf("%s holds no event, and its last one, from %s, is not before --since %s: every transition since then aged out or was removed (max age %s), so the replay cannot prove what happened",
			events.EventsStream, timestamp(st.LastTime), timestamp(since), info.Config.MaxAge)
	}
	if st.Msgs == 0 || st.LastTime.Before(since) {
		return out, nil
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.EventSubjects},
		DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &since})
	if err != nil {
		return out, fmt.Errorf("read %s: %w", events.EventsStream, err)
	}
	seen := map[identity.DeliveryKey]map[int64]bool{}
	err = readStream(ctx, events.EventsStream, cons, st.LastSeq, func(msg jetstream.Msg, meta *jetstream.MsgMetadata) error {
		e, err := events.Unmarshal(msg.Data())
		if err != nil {
			out.unreadable = append(out.unreadable, unreadableEvent{Subject: msg.Subject(), Sequence: meta.Sequence.Stream, Error: err.Error()})
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
		out.events++
		out.maxEpoch = max(out.maxEpoch, e.Epoch)
		t := ledger.StreamTransition{Seq: e.Seq, From: ledger.State(e.From), To: ledger.State(e.To), Epoch: e.Epoch, Generation: e.Generation}
		if e.Attempt != nil {
			t.Attempt = *e.Attempt
		}
		h.Transitions = append(h.Transitions, t)
		return nil
	})
	for _, h := range out.histories {
		slices.SortFunc(h.Transitions, func(a, b ledger.StreamTransition) int { return int(a.Seq - b.Seq) })
	}
	return out, err
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
