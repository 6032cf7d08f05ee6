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
  atmost restore reconcile --since TIME [--dry-run] [--bump-epoch --reason TEXT] [--operator NAME] [--nats-url URL] [--json]

After the ledger was restored from a backup taken at TIME (RFC 3339), and BEFORE any worker
starts: replays ATMOST_EVENTS from TIME and brings every intent whose stream history is ahead of
the restored ledger up to it, one guarded ledger operation per intent, with the operator as
actor (README, "Fencing and the restore protocol"):

  published on the stream                            -> published      (restore_published)
  authorized on the stream, outcome unknown there    -> indeterminate  (restore_ahead; reconciled by one lookup)
  authorized on the stream, then steps the ledger lost -> parked       (restore_parked)
  never authorized since the ledger's point, pending -> pending        (restore_resumed)
  anything else                                      -> parked         (restore_parked)

An intent the restored ledger lacks (created after the backup) is recreated in that state from
its envelope on ATMOST_INTENTS. When its envelope is gone, it is listed for a human and the
command exits 1: nothing stops a producer from publishing it again until a human acts.

TIME must be at or before the moment the backup was taken: earlier is always safe, later is
not. The epoch must have been bumped after TIME (atmost epoch bump), or pass --bump-epoch to
bump it first. --dry-run changes nothing and prints what would change. Running it again
changes nothing.
`

func runRestore(ctx context.Context, io IO, args []string) int {
	var since, natsURL *string
	var dryRun, bump *bool
	c, _, code, done := parseControl(io, "restore", restoreUsage, args,
		map[string][]string{"reconcile": {"since", "dry-run", "bump-epoch", "reason", "operator", "nats-url"}}, func(fs *flag.FlagSet) {
			since = fs.String("since", "", "reconcile: the time the backup was taken (RFC 3339); the replay starts there")
			dryRun = fs.Bool("dry-run", false, "reconcile: change nothing, print what would change")
			bump = fs.Bool("bump-epoch", false, "reconcile: bump the restore epoch first (requires --reason)")
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

	l, closeLedger, err := openLedger(ctx, *c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()

	// The restore protocol: the epoch first, so that no worker of the old epoch can claim or
	// complete anything on the restored ledger.
	epoch, err := l.CurrentEpoch(ctx)
	if err != nil {
		return c.fail(err)
	}
	if *bump {
		if _, err := l.BumpEpoch(ctx, operator, reason); err != nil {
			return c.fail(err)
		}
		if epoch, err = l.CurrentEpoch(ctx); err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(io.Stderr, "%s: epoch bumped to %d\n", c.name, epoch.Epoch)
	}
	if !epoch.At.After(from) {
		msg := fmt.Sprintf("the current epoch %d began at %s, not after --since %s: bump it before any worker reconnects (atmost epoch bump --reason ..., or --bump-epoch here)",
			epoch.Epoch, timestamp(epoch.At), timestamp(from))
		if !*dryRun {
			fmt.Fprintf(io.Stderr, "%s: refused: %s\n", c.name, msg)
			return ExitError
		}
		fmt.Fprintf(io.Stderr, "%s: warning: %s\n", c.name, msg)
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
		return c.fail(err)
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
	gaps := 0
	for _, k := range keys {
		h := replay.histories[k]
		first := h.Transitions[0].Seq
		if in, ok := held[k]; ok {
			if first > in.Seq+1 {
				gaps++
			}
		} else {
			missing[k] = h
			if first > 1 {
				gaps++
			}
		}
	}
	if gaps > 0 {
		fmt.Fprintf(io.Stderr, "%s: warning: %d intents have transitions between the ledger's point and the replay's first that the replay does not hold: is --since at or before the backup time?\n", c.name, gaps)
	}
	envelopes := 0
	if len(missing) > 0 {
		if envelopes, err = findEnvelopes(ctx, js, missing); err != nil {
			return c.fail(err)
		}
	}

	report := restoreReport{Since: from, DryRun: *dryRun, Epoch: epoch.Epoch, Events: replay.events, Intents: len(keys),
		Missing: len(missing), EnvelopesFound: envelopes, Totals: map[string]int{}}
	detail := map[string]any{"since": timestamp(from), "command": "atmost restore reconcile", "epoch": epoch.Epoch}
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
	if report.NeedsHuman > 0 {
		fmt.Fprintf(io.Stderr, "%s: %d intents the stream knows are not in the ledger and could not be recreated: a human must decide each (their delivery keys would be accepted again as new)\n", c.name, report.NeedsHuman)
		return ExitError
	}
	return ExitOK
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
}

// replayEvents reads ATMOST_EVENTS from since up to its last message at the start, with an
// ordered consumer (nothing is acknowledged or left behind), and folds the transitions per
// intent, each seq once (a relay may have published one twice). It refuses a stream whose
// oldest message is younger than since: transitions after since may have aged out.
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
	if st.Msgs > 0 && st.FirstSeq > 1 && st.FirstTime.After(since) {
		return out, fmt.Errorf("%s's oldest event is from %s, after --since %s: transitions since then may have aged out (max age %s), so the replay cannot prove what happened; restore from a newer backup",
			events.EventsStream, timestamp(st.FirstTime), timestamp(since), info.Config.MaxAge)
	}
	if st.Msgs == 0 || st.LastTime.Before(since) {
		return out, nil
	}
	seen := map[identity.DeliveryKey]map[int64]bool{}
	err = readStream(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.EventSubjects},
		DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &since}, st.LastSeq, func(data []byte) error {
		e, err := events.Unmarshal(data)
		if err != nil {
			return nil // not an event: nothing to replay
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
// their accounts' subjects, and returns how many it found.
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
	found := 0
	err = readStream(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: subjects, DeliverPolicy: jetstream.DeliverAllPolicy},
		info.State.LastSeq, func(data []byte) error {
			env, err := identity.ParseEnvelope(data)
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

// readStream hands every message cfg delivers, up to stream sequence last, to fn.
func readStream(ctx context.Context, stream jetstream.Stream, cfg jetstream.OrderedConsumerConfig, last uint64, fn func([]byte) error) error {
	cons, err := stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("read %s: %w", stream.CachedInfo().Config.Name, err)
	}
	for {
		batch, err := cons.Fetch(256, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return fmt.Errorf("read %s: %w", stream.CachedInfo().Config.Name, err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			meta, err := msg.Metadata()
			if err != nil {
				return fmt.Errorf("read %s: %w", stream.CachedInfo().Config.Name, err)
			}
			if err := fn(msg.Data()); err != nil {
				return err
			}
			if meta.Sequence.Stream >= last || meta.NumPending == 0 {
				return batch.Error()
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return fmt.Errorf("read %s: %w", stream.CachedInfo().Config.Name, err)
		}
		if n == 0 {
			return nil // nothing more matches
		}
	}
}
