package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/cli"
	"github.com/atmost/atmost/internal/dbtest"
	"github.com/atmost/atmost/internal/dispatch"
	"github.com/atmost/atmost/internal/natstest"
	"github.com/atmost/atmost/internal/platformsim"
	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/streams"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/sim"
)

// restoreWorld is a running atmost against one database: a ledger, its relay, and the shared
// JetStream and platform simulator, which outlive a ledger restore as they would in production.
type restoreWorld struct {
	t     *testing.T
	ctx   context.Context
	js    jetstream.JetStream
	sim   *platformsim.Server
	db    *dbtest.DB
	l     *ledger.Ledger
	relay *relay.Relay
}

func (w *restoreWorld) on(db *dbtest.DB) *restoreWorld {
	l, err := ledger.New(db.AppPool(w.t), ledger.Config{Actor: "test"})
	require.NoError(w.t, err)
	return &restoreWorld{t: w.t, ctx: w.ctx, js: w.js, sim: w.sim, db: db, l: l, relay: relay.New(l, w.js, relay.Config{})}
}

// submit does what ingest does: the producer's envelope is on ATMOST_INTENTS, the intent in the
// ledger, its events and work item relayed.
func (w *restoreWorld) submit(prefix string, n int) []identity.DeliveryKey {
	w.t.Helper()
	var envs []identity.Envelope
	for i := range n {
		raw := fmt.Sprintf(`{"v":1,"account":"acct-1","action":"post","request":{"text":"%s %d"}}`, prefix, i)
		env, err := identity.ParseEnvelope([]byte(raw))
		require.NoError(w.t, err)
		_, err = w.js.Publish(w.ctx, events.IntentSubject("acct-1"), []byte(raw))
		require.NoError(w.t, err)
		envs = append(envs, env)
	}
	res, err := w.l.Submit(w.ctx, envs)
	require.NoError(w.t, err)
	keys := make([]identity.DeliveryKey, n)
	for i, r := range res {
		require.Equal(w.t, ledger.Created, r.Outcome)
		keys[i] = r.Key
	}
	_, err = w.relay.Drain(w.ctx)
	require.NoError(w.t, err)
	return keys
}

// dispatch runs a dispatcher until every one of keys has left pending and authorized and its
// work queue is drained.
func (w *restoreWorld) dispatch(keys []identity.DeliveryKey, within time.Duration) {
	w.t.Helper()
	d, err := dispatch.New(w.ctx, w.js, w.l, w.relay, dispatch.Config{
		Platforms: platform.Registry{sim.Name: sim.Open}, Batch: 16, Concurrency: 32,
		ClaimLease: ledger.MinLease, InFlightLease: ledger.MinLease, SendTimeout: 2 * time.Second,
		ReadBackTimeout: time.Second, Margin: time.Second, GateDelay: 200 * time.Millisecond, AckWait: 2 * time.Second,
	})
	require.NoError(w.t, err)
	ctx, cancel := context.WithCancel(w.ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); require.NoError(w.t, <-done) }()
	consumer, err := w.js.Consumer(w.ctx, events.DispatchStream, "dispatcher")
	require.NoError(w.t, err)
	require.Eventually(w.t, func() bool {
		got, err := w.l.GetMany(w.ctx, keys)
		if err != nil {
			return false
		}
		for _, in := range got {
			if in.State == ledger.Pending || in.State == ledger.Authorized {
				return false
			}
		}
		info, err := consumer.Info(w.ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && len(got) == len(keys)
	}, within, 20*time.Millisecond, "the dispatcher never finished its work")
}

// snapshot is every row restore reconcile may write.
func snapshot(t *testing.T, db *dbtest.DB) string {
	t.Helper()
	var s string
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT concat_ws(' | ',
		(SELECT string_agg(to_jsonb(i)::TEXT, ',' ORDER BY delivery_key) FROM intents i),
		(SELECT count(*)::TEXT FROM history), (SELECT count(*)::TEXT FROM outbox),
		(SELECT max(epoch)::TEXT FROM epochs))`).Scan(&s))
	return s
}

// libpqURL is db's URL as pg_dump and pg_restore read it: without the pgx-only parameters.
func libpqURL(t *testing.T, db *dbtest.DB) string {
	u, err := url.Parse(db.URL)
	require.NoError(t, err)
	q := url.Values{}
	if mode := u.Query().Get("sslmode"); mode != "" {
		q.Set("sslmode", mode)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// streamStates folds ATMOST_EVENTS into each intent's transitions, as the stream holds them.
func streamStates(t *testing.T, ctx context.Context, js jetstream.JetStream) map[identity.DeliveryKey][]events.Event {
	t.Helper()
	stream, err := js.Stream(ctx, events.EventsStream)
	require.NoError(t, err)
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	out := map[identity.DeliveryKey][]events.Event{}
	for {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(time.Second))
		require.NoError(t, err)
		n := 0
		for msg := range batch.Messages() {
			n++
			e, err := events.Unmarshal(msg.Data())
			require.NoError(t, err)
			out[e.DeliveryKey] = append(out[e.DeliveryKey], e)
		}
		if n == 0 {
			return out
		}
	}
}

// The restore protocol end to end: traffic runs, the ledger is dumped mid-run, traffic goes on
// (authorizations, publications, sends of unknown outcome, new intents), the dump is restored
// and restore reconcile replays the stream. Afterwards nothing the stream shows authorized or
// beyond is pending, what it shows published is published, and a dispatcher on the restored
// ledger, handed work for every intent, sends nothing twice.
func TestRestoreReconcileAfterAMidRunRestoreSendsNothingTwice(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"pg_dump", "pg_restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := tool + " is not on PATH: this test restores a real dump; install the PostgreSQL client (apt-get install postgresql-client)"
			if os.Getenv("CI") == "true" {
				t.Fatal(msg) // CI installs it with PostgreSQL: never pass CI by skipping the restore's proof
			}
			t.Skip(msg)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv := natstest.New(t)
	nc := srv.Connect(t)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	require.NoError(t, streams.Ensure(ctx, nc, js, streams.Config{}))
	s, err := platformsim.New(platformsim.Config{})
	require.NoError(t, err)
	simURL, _, err := s.Serve(ctx, "127.0.0.1:0")
	require.NoError(t, err)
	w := (&restoreWorld{t: t, ctx: ctx, js: js, sim: s}).on(dbtest.New(t))
	require.NoError(t, w.l.AddAccount(ctx, ledger.Account{ID: "acct-1", Platform: sim.Name, Settings: json.RawMessage(fmt.Sprintf(`{"url":%q}`, simURL))}))
	unlimited := 0
	_, err = w.l.SetPolicy(ctx, "acct-1", ledger.PolicyEdit{Set: ledger.PolicyOverride{RatePerMinute: &unlimited}}, "test", "not about the rate limit")
	require.NoError(t, err)

	// Before the backup: some intents published, some waiting.
	early := w.submit("early", 10)
	w.dispatch(early, 30*time.Second)
	// The backup time given to the command is at or before the backup (earlier is always
	// safe) and no later than the newest history row the backup holds (the command checks).
	since := time.Now()
	waiting := w.submit("waiting", 12)

	// The backup.
	dump := filepath.Join(t.TempDir(), "ledger.dump")
	out, err := exec.Command("pg_dump", "-Fc", "-f", dump, libpqURL(t, w.db)).CombinedOutput()
	require.NoError(t, err, string(out))

	// After it: the waiting intents are sent (two of them with an unknown outcome: the platform
	// created the object and dropped the connection), new intents come and are sent, and the
	// last ones come and are not dispatched yet.
	require.NoError(t, s.SetPlan(platformsim.Plan{Script: []platformsim.Fault{platformsim.FaultDropAfterCommit, platformsim.FaultDropAfterCommit}}))
	w.dispatch(waiting, 30*time.Second)
	later := w.submit("later", 8)
	w.dispatch(later, 30*time.Second)
	last := w.submit("last", 5)
	_, err = w.relay.Drain(ctx)
	require.NoError(t, err)

	// The ledger is lost and restored from the backup.
	restored := dbtest.New(t, dbtest.Empty())
	out, err = exec.Command("pg_restore", "--no-owner", "-d", libpqURL(t, restored), dump).CombinedOutput()
	require.NoError(t, err, string(out))
	r := w.on(restored)
	before, err := r.l.GetMany(ctx, waiting)
	require.NoError(t, err)
	for _, in := range before {
		require.Equal(t, ledger.Pending, in.State, "the restored ledger forgot what was sent after the backup")
	}

	env := map[string]string{"ATMOST_DATABASE_URL": restored.URL, "ATMOST_NATS_URL": srv.URL, "ATMOST_OPERATOR": "alice"}
	args := []string{"restore", "reconcile", "--since", since.UTC().Format(time.RFC3339Nano)}

	// A dry run changes nothing, and says what it would change.
	untouched := snapshot(t, restored)
	res := run(env, append(args, "--dry-run")...)
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Contains(t, res.stderr, "bump it before any worker reconnects", "the dry run reminds of the epoch")
	t.Log(res.stdout)
	require.Contains(t, res.stdout, "would change 25:")
	require.Contains(t, res.stdout, "dry run: nothing was changed")
	require.Equal(t, untouched, snapshot(t, restored))

	// Without the epoch bumped after the backup, it refuses.
	res = run(env, args...)
	require.Equal(t, cli.ExitError, res.code, res.stdout)
	require.Contains(t, res.stderr, "refused")
	require.Equal(t, untouched, snapshot(t, restored))

	res = run(env, append(args, "--bump-epoch", "--reason", "restored from the mid-run backup", "--json")...)
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var report struct {
		Epoch   int64          `json:"epoch"`
		Totals  map[string]int `json:"totals"`
		Results []struct {
			To      string `json:"to"`
			Verdict string `json:"verdict"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &report), res.stdout)
	require.Equal(t, int64(2), report.Epoch)
	require.Equal(t, 12, report.Totals["moved"], "every waiting intent was behind the stream")
	require.Equal(t, 13, report.Totals["created"], "every intent created after the backup was recreated")
	require.Equal(t, 2, report.Totals["to indeterminate"], "the two sends of unknown outcome")
	require.Equal(t, 18, report.Totals["to published"])
	require.Equal(t, 5, report.Totals["to pending"], "the intents never dispatched are work again")

	// What the stream shows authorized or beyond is never pending; what it shows published is
	// published.
	stream := streamStates(t, ctx, js)
	all := append(append(append(append([]identity.DeliveryKey{}, early...), waiting...), later...), last...)
	got, err := r.l.GetMany(ctx, all)
	require.NoError(t, err)
	require.Len(t, got, len(all))
	for _, k := range all {
		var authorized, published bool
		for _, e := range stream[k] {
			authorized = authorized || e.To == "authorized" || e.To == "indeterminate"
			published = published || e.To == "published"
		}
		in := got[k]
		if authorized {
			require.NotEqual(t, ledger.Pending, in.State, "%s: the stream shows it authorized", k)
			require.NotEqual(t, ledger.Failed, in.State, "%s: the stream shows it authorized", k)
		}
		if published {
			require.Equal(t, ledger.Published, in.State, "%s", k)
		}
	}
	for _, k := range last {
		require.Equal(t, ledger.Pending, got[k].State)
		require.Equal(t, ledger.ReasonRestoreResumed, got[k].Reason)
	}

	// A second run changes nothing.
	reconciled := snapshot(t, restored)
	res = run(env, args...)
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "changed 0:")
	require.Equal(t, reconciled, snapshot(t, restored))

	// The workers start on the restored ledger: the relay publishes the restore's transitions
	// (their event ids are new: the stream keeps every one), and a dispatcher is handed work for
	// every intent, as a sweeper republishing stranded work might. It sends only what was never
	// sent, once.
	eventsBefore := streamEvents(t, ctx, js)
	n, err := r.relay.Drain(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 25)
	require.GreaterOrEqual(t, streamEvents(t, ctx, js)-eventsBefore, uint64(25), "no restore transition was dropped as a duplicate")
	for _, k := range all {
		wi := events.WorkItem{V: events.Version, DeliveryKey: k, Account: "acct-1", Event: events.NewID(k, 1)}
		data, err := json.Marshal(wi)
		require.NoError(t, err)
		_, err = js.PublishMsg(ctx, &nats.Msg{Subject: wi.Subject(), Data: data, Header: nats.Header{jetstream.MsgIDHeader: []string{wi.MsgID() + ":after-restore"}}})
		require.NoError(t, err)
	}
	r.dispatch(all, 30*time.Second)
	counts := s.Counts()
	require.LessOrEqual(t, counts.MaxCreatedPerKey, 1, "keys sent twice: %v", counts.KeysOverOne)
	for _, k := range all {
		require.Equal(t, 1, s.Created(k.String()), "%s: every intent exists on the platform exactly once", k)
	}
	final, err := r.l.GetMany(ctx, last)
	require.NoError(t, err)
	for _, in := range final {
		require.Equal(t, ledger.Published, in.State)
	}
	orphans, err := r.l.Orphans(ctx)
	require.NoError(t, err)
	require.Zero(t, orphans.Total(), "the restore wrote rows whose intent does not exist: %+v", orphans)
}

func streamEvents(t *testing.T, ctx context.Context, js jetstream.JetStream) uint64 {
	t.Helper()
	stream, err := js.Stream(ctx, events.EventsStream)
	require.NoError(t, err)
	info, err := stream.Info(ctx)
	require.NoError(t, err)
	return info.State.Msgs
}

// An intent created after the backup whose envelope is no longer on ATMOST_INTENTS cannot be
// recreated: it is listed for a human, and the command says so with exit 1.
func TestRestoreReconcileListsIntentsItCannotRecreate(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv := natstest.New(t)
	nc := srv.Connect(t)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	require.NoError(t, streams.Ensure(ctx, nc, js, streams.Config{}))
	db := dbtest.New(t)
	w := (&restoreWorld{t: t, ctx: ctx, js: js}).on(db)
	require.NoError(t, w.l.AddAccount(ctx, ledger.Account{ID: "acct-1", Platform: sim.Name, Settings: json.RawMessage(`{"url":"http://127.0.0.1:1"}`)}))
	since := afterStreams(t)
	// Submitted and relayed, but its envelope never reached ATMOST_INTENTS here; then the
	// ledger loses it (the restore of a backup without it). The backup holds another intent.
	w.submit("kept", 1)
	env, err := identity.ParseEnvelope([]byte(`{"v":1,"account":"acct-1","action":"post","request":{"text":"lost"}}`))
	require.NoError(t, err)
	_, err = w.l.Submit(ctx, []identity.Envelope{env})
	require.NoError(t, err)
	_, err = w.relay.Drain(ctx)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `DELETE FROM outbox WHERE delivery_key = $1`, env.DeliveryKey().Bytes())
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `DELETE FROM history WHERE delivery_key = $1`, env.DeliveryKey().Bytes())
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `DELETE FROM intents WHERE delivery_key = $1`, env.DeliveryKey().Bytes())
	require.NoError(t, err)

	env2 := map[string]string{"ATMOST_DATABASE_URL": db.URL, "ATMOST_NATS_URL": srv.URL, "ATMOST_OPERATOR": "alice"}
	res := run(env2, "restore", "reconcile", "--since", since.UTC().Format(time.RFC3339Nano), "--bump-epoch", "--reason", "test")
	require.Equal(t, cli.ExitError, res.code, res.stdout)
	require.Contains(t, res.stdout, env.DeliveryKey().String())
	require.Contains(t, res.stdout, "NOT RECREATED: no_envelope")
	require.Contains(t, res.stderr, "a human must decide")
	require.Contains(t, res.stderr, "their delivery keys are blocked")
	_, err = w.l.Get(ctx, env.DeliveryKey())
	require.ErrorIs(t, err, ledger.ErrNotFound)

	// The producer publishes it again: a duplicate, never a pending intent (a second send).
	sub, err := w.l.Submit(ctx, []identity.Envelope{env})
	require.NoError(t, err)
	require.Equal(t, ledger.Duplicate, sub[0].Outcome)
	_, err = w.l.Get(ctx, env.DeliveryKey())
	require.ErrorIs(t, err, ledger.ErrNotFound)
}

// afterStreams returns a time after the streams were created (the command refuses a --since
// before ATMOST_EVENTS existed) and before anything the test submits next.
func afterStreams(t *testing.T) time.Time {
	t.Helper()
	time.Sleep(20 * time.Millisecond)
	since := time.Now()
	time.Sleep(20 * time.Millisecond)
	return since
}

func TestRestoreReconcileNeedsSince(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"restore", "reconcile"},
		{"restore", "reconcile", "--since", "yesterday"},
		{"restore", "reconcile", "--since", "2020-01-01T00:00:00Z", "--dry-run", "--bump-epoch", "--reason", "x"},
		{"restore", "reconcile", "--since", "2020-01-01T00:00:00Z", "--bump-epoch"},
	} {
		res := run(map[string]string{"ATMOST_OPERATOR": "alice"}, args...)
		require.Equal(t, cli.ExitUsage, res.code, "%v: %s", args, res.stderr)
	}
}

// restoreCase is a small world for the refusals: NATS with atmost's streams, a migrated ledger
// with one account, and the command's environment.
func restoreCase(t *testing.T, ensure bool) (*restoreWorld, *natstest.Server, map[string]string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv := natstest.New(t)
	nc := srv.Connect(t)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	if ensure {
		require.NoError(t, streams.Ensure(ctx, nc, js, streams.Config{}))
	}
	db := dbtest.New(t)
	w := (&restoreWorld{t: t, ctx: ctx, js: js}).on(db)
	require.NoError(t, w.l.AddAccount(ctx, ledger.Account{ID: "acct-1", Platform: sim.Name, Settings: json.RawMessage(`{"url":"http://127.0.0.1:1"}`)}))
	return w, srv, map[string]string{"ATMOST_DATABASE_URL": db.URL, "ATMOST_NATS_URL": srv.URL, "ATMOST_OPERATOR": "alice"}
}

func reconcileArgs(since time.Time, more ...string) []string {
	return append([]string{"restore", "reconcile", "--since", since.UTC().Format(time.RFC3339Nano)}, more...)
}

// publishEvent puts a transition on ATMOST_EVENTS as the relay would.
func (w *restoreWorld) publishEvent(key identity.DeliveryKey, seq int64, from, to string) {
	w.t.Helper()
	e := events.Event{V: events.Version, ID: events.NewID(key, seq), DeliveryKey: key, Seq: seq, Account: "acct-1",
		From: from, To: to, Reason: "test", Actor: "test", At: time.Now()}
	data, err := e.Marshal()
	require.NoError(w.t, err)
	_, err = w.js.Publish(w.ctx, e.Subject(), data)
	require.NoError(w.t, err)
}

// When the replay cannot be proven complete, the command changes nothing and exits 1, even
// with the epoch bumped: what it cannot see may be an authorization, and an intent resumed
// pending on a partial history would be sent twice.
func TestRestoreReconcileRefusesAReplayItCannotProveComplete(t *testing.T) {
	t.Parallel()
	bump := []string{"--bump-epoch", "--reason", "restored"}

	t.Run("every event aged out after since", func(t *testing.T) {
		t.Parallel()
		w, _, env := restoreCase(t, true)
		since := afterStreams(t)
		w.submit("sent, then aged out", 1)
		stream, err := w.js.Stream(w.ctx, events.EventsStream)
		require.NoError(t, err)
		require.NoError(t, stream.Purge(w.ctx))
		before := snapshot(t, w.db)
		res := run(env, reconcileArgs(since, bump...)...)
		require.Equal(t, cli.ExitError, res.code, res.stdout)
		require.Contains(t, res.stderr, "holds no event")
		require.Equal(t, before, snapshot(t, w.db))
	})

	t.Run("the stream was created after since", func(t *testing.T) {
		t.Parallel()
		w, srv, env := restoreCase(t, false)
		since := time.Now()
		time.Sleep(20 * time.Millisecond)
		require.NoError(t, streams.Ensure(w.ctx, srv.Connect(t), w.js, streams.Config{}))
		w.submit("after the stream was recreated", 1)
		before := snapshot(t, w.db)
		res := run(env, reconcileArgs(since, bump...)...)
		require.Equal(t, cli.ExitError, res.code, res.stdout)
		require.Contains(t, res.stderr, "was created at")
		require.Equal(t, before, snapshot(t, w.db))
	})

	t.Run("since is later than the restored ledger's newest history", func(t *testing.T) {
		t.Parallel()
		w, _, env := restoreCase(t, true)
		w.submit("the backup's last", 1)
		since := time.Now()
		before := snapshot(t, w.db)
		res := run(env, reconcileArgs(since, bump...)...)
		require.Equal(t, cli.ExitError, res.code, res.stdout)
		require.Contains(t, res.stderr, "later than the newest history row")
		require.Equal(t, before, snapshot(t, w.db))
	})

	t.Run("an intent's replay starts after a gap", func(t *testing.T) {
		t.Parallel()
		w, _, env := restoreCase(t, true)
		time.Sleep(20 * time.Millisecond)
		gapped := w.submit("claimed before since, authorized after", 1)[0]
		w.publishEvent(gapped, 2, "pending", "pending")
		since := afterStreams(t)
		w.submit("the backup's last", 1)
		w.publishEvent(gapped, 3, "pending", "failed") // seq 2 is before since: not replayed
		before := snapshot(t, w.db)
		res := run(env, reconcileArgs(since, bump...)...)
		require.Equal(t, cli.ExitError, res.code, res.stdout)
		require.Contains(t, res.stderr, "replay does not hold")
		require.Contains(t, res.stderr, gapped.String())
		require.Equal(t, before, snapshot(t, w.db))
	})

	t.Run("an event cannot be read", func(t *testing.T) {
		t.Parallel()
		w, _, env := restoreCase(t, true)
		since := afterStreams(t)
		key := w.submit("behind the stream", 1)[0]
		w.publishEvent(key, 2, "pending", "pending")
		_, err := w.js.Publish(w.ctx, events.EventSubject("authorized", "acct-1"), []byte(`{"v":1,"not":"an event"}`))
		require.NoError(t, err)
		before := snapshot(t, w.db)
		res := run(env, reconcileArgs(since, bump...)...)
		require.Equal(t, cli.ExitError, res.code, res.stdout)
		require.Contains(t, res.stderr, "cannot be read")
		require.Contains(t, res.stderr, events.EventSubject("authorized", "acct-1")+" seq 3")
		require.Equal(t, before, snapshot(t, w.db))

		// Told to go on without it: it does, lists it, and still exits 1.
		res = run(env, reconcileArgs(since, append(bump, "--skip-unreadable")...)...)
		require.Equal(t, cli.ExitError, res.code, res.stdout)
		require.Contains(t, res.stderr, "unreadable events were skipped")
		require.Contains(t, res.stderr, " seq 3")
		require.Equal(t, ledger.Pending, w.state(key))
		require.Contains(t, res.stdout, "changed 1:")
	})
}

// The current epoch must have been bumped after the restore: an epoch the restored data
// already holds (bumped between since and the backup), or one a worker already used, is not
// enough.
func TestRestoreReconcileRefusesAnEpochThatWasNotBumpedAfterTheRestore(t *testing.T) {
	t.Parallel()
	w, _, env := restoreCase(t, true)
	since := afterStreams(t)
	w.submit("before the bump", 1)
	_, err := w.l.BumpEpoch(w.ctx, "bob", "an epoch bump before the backup")
	require.NoError(t, err)
	time.Sleep(20 * time.Millisecond)
	key := w.submit("claimed in the new epoch, before the backup", 1)[0]
	_, err = w.l.Begin(w.ctx, key, [32]byte{1}, ledger.MinLease)
	require.NoError(t, err)
	before := snapshot(t, w.db)
	res := run(env, reconcileArgs(since)...)
	require.Equal(t, cli.ExitError, res.code, res.stdout)
	require.Contains(t, res.stderr, "before the newest history row")
	require.Equal(t, before, snapshot(t, w.db))

	// Bumped by the command: it goes on.
	res = run(env, reconcileArgs(since, "--bump-epoch", "--reason", "restored")...)
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Contains(t, res.stderr, "epoch bumped to 3")
}

func (w *restoreWorld) state(key identity.DeliveryKey) ledger.State {
	w.t.Helper()
	in, err := w.l.Get(w.ctx, key)
	require.NoError(w.t, err)
	return in.State
}
