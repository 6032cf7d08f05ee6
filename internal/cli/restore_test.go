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
	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/streams"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/internal/tools/platformsim"
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

// published does what a dispatcher does with one new intent, without a platform: it claims
// and authorizes it, publishes the authorization (the witness) and records the send as
// published, with the stream sequence JetStream acknowledged the authorized event at. A
// restored ledger holding it proves the replay reaches back to that message.
func (w *restoreWorld) published(prefix string) identity.DeliveryKey {
	key, _ := w.witnessed(prefix)
	return key
}

// witnessed is published, and returns the stream sequence of the authorized event too.
func (w *restoreWorld) witnessed(prefix string) (identity.DeliveryKey, uint64) {
	w.t.Helper()
	key := w.submit(prefix, 1)[0]
	c, err := w.l.Begin(w.ctx, key, [32]byte{1}, ledger.MinLease)
	require.NoError(w.t, err)
	a, err := w.l.Authorize(w.ctx, c, ledger.MinLease, "sim/1")
	require.NoError(w.t, err)
	require.Equal(w.t, ledger.Authorized, a.State, "reason %s", a.Reason)
	seqs, err := w.relay.Witness(w.ctx, []ledger.Claim{c})
	require.NoError(w.t, err)
	require.NotZero(w.t, seqs[key])
	_, err = w.l.Complete(w.ctx, c, ledger.Outcome{Result: ledger.Sent, ObjectID: "object-" + prefix, Confirmed: true, WitnessSeq: seqs[key]})
	require.NoError(w.t, err)
	_, err = w.relay.Drain(w.ctx)
	require.NoError(w.t, err)
	return key, seqs[key]
}

// backedUpBeforeWitnessSequences makes w's ledger one backed up before atmost recorded the
// stream sequence of each acknowledged authorization: its evidence names none.
func (w *restoreWorld) backedUpBeforeWitnessSequences() {
	w.t.Helper()
	_, err := w.db.Pool.Exec(w.ctx, `UPDATE attempt_evidence SET witness_seq = NULL`)
	require.NoError(w.t, err)
}

// lateCopy stores msg on ATMOST_EVENTS again: what a relay's reconnect buffer flushed after the
// duplicate window stores. Inside the window JetStream would drop it by its Nats-Msg-Id, so the
// copy goes without that header (the restore reads only the event); it returns its sequence.
func (w *restoreWorld) lateCopy(msg *jetstream.RawStreamMsg) uint64 {
	w.t.Helper()
	ack, err := w.js.PublishMsg(w.ctx, &nats.Msg{Subject: msg.Subject, Data: msg.Data})
	require.NoError(w.t, err)
	require.False(w.t, ack.Duplicate)
	return ack.Sequence
}

// eventAt is the message at seq on ATMOST_EVENTS.
func (w *restoreWorld) eventAt(seq uint64) *jetstream.RawStreamMsg {
	w.t.Helper()
	stream, err := w.js.Stream(w.ctx, events.EventsStream)
	require.NoError(w.t, err)
	msg, err := stream.GetMsg(w.ctx, seq)
	require.NoError(w.t, err)
	return msg
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

// requireDumpTools fails (in CI) or skips the test without pg_dump and pg_restore.
func requireDumpTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"pg_dump", "pg_restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := tool + " is not on PATH: this test restores a real dump; install the PostgreSQL client (apt-get install postgresql-client)"
			if os.Getenv("CI") == "true" {
				t.Fatal(msg) // CI installs it with PostgreSQL: never pass CI by skipping the restore's proof
			}
			t.Skip(msg)
		}
	}
}

// sendingWorld is a restoreWorld whose account sends to a running platform simulator.
func sendingWorld(t *testing.T) (*restoreWorld, *natstest.Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv := natstest.New(t)
	js := srv.Streams(t)
	s, err := platformsim.New(platformsim.Config{})
	require.NoError(t, err)
	simURL, _, err := s.Serve(ctx, "127.0.0.1:0")
	require.NoError(t, err)
	w := (&restoreWorld{t: t, ctx: ctx, js: js, sim: s}).on(dbtest.New(t))
	require.NoError(t, w.l.AddAccount(ctx, ledger.Account{ID: "acct-1", Platform: sim.Name, Settings: json.RawMessage(fmt.Sprintf(`{"url":%q}`, simURL))}, ledger.Actor{Name: "test", Reason: "a test account"}))
	unlimited := 0
	_, err = w.l.SetPolicy(ctx, "acct-1", ledger.PolicyEdit{Set: ledger.PolicyOverride{RatePerMinute: &unlimited}}, ledger.Actor{Name: "test", Reason: "not about the rate limit"})
	require.NoError(t, err)
	return w, srv
}

// dump is pg_dump of w's database; restore loads a dump into a new database, as a ledger
// restored from a backup.
func (w *restoreWorld) dump() string {
	w.t.Helper()
	dump := filepath.Join(w.t.TempDir(), "ledger.dump")
	out, err := exec.Command("pg_dump", "-Fc", "-f", dump, libpqURL(w.t, w.db)).CombinedOutput()
	require.NoError(w.t, err, string(out))
	return dump
}

func (w *restoreWorld) restore(dump string) *restoreWorld {
	w.t.Helper()
	restored := dbtest.New(w.t, dbtest.Empty())
	out, err := exec.Command("pg_restore", "--no-owner", "-d", libpqURL(w.t, restored), dump).CombinedOutput()
	require.NoError(w.t, err, string(out))
	return w.on(restored)
}

// dispatchAgain hands a dispatcher on w's ledger work for every one of keys, as a sweeper
// republishing stranded work might, after the relay published what the ledger holds.
func (w *restoreWorld) dispatchAgain(keys []identity.DeliveryKey) {
	w.t.Helper()
	_, err := w.relay.Drain(w.ctx)
	require.NoError(w.t, err)
	for _, k := range keys {
		wi := events.WorkItem{V: events.Version, DeliveryKey: k, Account: "acct-1", Event: events.NewID(k, 1)}
		data, err := json.Marshal(wi)
		require.NoError(w.t, err)
		_, err = w.js.PublishMsg(w.ctx, &nats.Msg{Subject: wi.Subject(), Data: data, Header: nats.Header{jetstream.MsgIDHeader: []string{wi.MsgID() + ":after-restore"}}})
		require.NoError(w.t, err)
	}
	w.dispatch(keys, 30*time.Second)
}

// The restore protocol end to end: traffic runs, the ledger is dumped mid-run, traffic goes on
// (authorizations, publications, sends of unknown outcome, new intents), the dump is restored
// and restore reconcile replays the stream. Afterwards nothing the stream shows authorized or
// beyond is pending, what it shows published is published, and a dispatcher on the restored
// ledger, handed work for every intent, sends nothing twice.
func TestRestoreReconcileAfterAMidRunRestoreSendsNothingTwice(t *testing.T) {
	t.Parallel()
	requireDumpTools(t)
	w, srv := sendingWorld(t)
	ctx, js, s := w.ctx, w.js, w.sim

	// Before the backup: some intents published, some waiting.
	early := w.submit("early", 10)
	w.dispatch(early, 30*time.Second)
	// The backup time given to the command is at or before the backup (earlier is always
	// safe) and no later than the newest history row the backup holds (the command checks).
	since := time.Now()
	waiting := w.submit("waiting", 12)

	// The backup.
	dump := w.dump()

	// After it: the waiting intents are sent (two of them with an unknown outcome: the platform
	// created the object and dropped the connection), new intents come and are sent, and the
	// last ones come and are not dispatched yet.
	require.NoError(t, s.SetPlan(platformsim.Plan{Script: []platformsim.Fault{platformsim.FaultDropAfterCommit, platformsim.FaultDropAfterCommit}}))
	w.dispatch(waiting, 30*time.Second)
	later := w.submit("later", 8)
	w.dispatch(later, 30*time.Second)
	last := w.submit("last", 5)
	_, err := w.relay.Drain(ctx)
	require.NoError(t, err)

	// The ledger is lost and restored from the backup.
	r := w.restore(dump)
	restored := r.db
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
	requireSnakeCase(t, res.stdout)
	requireSnakeCase(t, res.stderr, "with --json the notes are JSON objects too")
	var report struct {
		Epoch    int64          `json:"epoch"`
		Recorded bool           `json:"witness_recorded"`
		Whole    bool           `json:"whole_stream"`
		Totals   map[string]int `json:"totals"`
		Results  []struct {
			To      string `json:"to"`
			Verdict string `json:"verdict"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &report), res.stdout)
	require.Equal(t, int64(2), report.Epoch)
	require.True(t, report.Recorded, "the restored ledger records the witness of its last publication")
	require.False(t, report.Whole)
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
	r.dispatchAgain(all)
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
	js := srv.Streams(t)
	db := dbtest.New(t)
	w := (&restoreWorld{t: t, ctx: ctx, js: js}).on(db)
	require.NoError(t, w.l.AddAccount(ctx, ledger.Account{ID: "acct-1", Platform: sim.Name, Settings: json.RawMessage(`{"url":"http://127.0.0.1:1"}`)}, ledger.Actor{Name: "test", Reason: "a test account"}))
	since := afterStreams(t)
	// Submitted and relayed, but its envelope never reached ATMOST_INTENTS here; then the
	// ledger loses it (the restore of a backup without it). The backup holds another intent.
	w.published("kept")
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
	require.NoError(t, w.l.AddAccount(ctx, ledger.Account{ID: "acct-1", Platform: sim.Name, Settings: json.RawMessage(`{"url":"http://127.0.0.1:1"}`)}, ledger.Actor{Name: "test", Reason: "a test account"}))
	return w, srv, map[string]string{"ATMOST_DATABASE_URL": db.URL, "ATMOST_NATS_URL": srv.URL, "ATMOST_OPERATOR": "alice"}
}

func reconcileArgs(since time.Time, more ...string) []string {
	return append([]string{"restore", "reconcile", "--since", since.UTC().Format(time.RFC3339Nano)}, more...)
}

// publishEvent puts a transition on ATMOST_EVENTS as the relay would and returns its stream
// sequence.
func (w *restoreWorld) publishEvent(key identity.DeliveryKey, seq int64, from, to ledger.State) uint64 {
	w.t.Helper()
	e := events.Event{V: events.Version, ID: events.NewID(key, seq), DeliveryKey: key, Seq: seq, Account: "acct-1",
		From: from, To: to, Reason: "test", Actor: "test", At: time.Now()}
	data, err := e.Marshal()
	require.NoError(w.t, err)
	ack, err := w.js.Publish(w.ctx, e.Subject(), data)
	require.NoError(w.t, err)
	return ack.Sequence
}

// removeEvent deletes the message at seq from ATMOST_EVENTS, as an operator might by hand.
func (w *restoreWorld) removeEvent(seq uint64) {
	w.t.Helper()
	stream, err := w.js.Stream(w.ctx, events.EventsStream)
	require.NoError(w.t, err)
	require.NoError(w.t, stream.DeleteMsg(w.ctx, seq))
}

// When the replay cannot be proven complete, the command changes nothing and exits 1, even
// with the epoch bumped: what it cannot see may be an authorization, and an intent resumed
// pending on a partial history would be sent twice. The refusals that depend on the witness
// run twice: with the witness the restored ledger records, and from a backup that records
// none (the whole stream is read, the first copy of an authorized event the witness).
func TestRestoreReconcileRefusesAReplayItCannotProveComplete(t *testing.T) {
	t.Parallel()
	bump := []string{"--bump-epoch", "--reason", "restored"}
	// refused runs the command and requires a refusal saying why, with nothing changed.
	refused := func(t *testing.T, w *restoreWorld, env map[string]string, since time.Time, why string) {
		t.Helper()
		before := snapshot(t, w.db)
		res := run(env, reconcileArgs(since, bump...)...)
		require.Equal(t, cli.ExitError, res.code, res.stdout)
		require.Contains(t, res.stderr, why)
		require.Equal(t, before, snapshot(t, w.db), "an intent the stream shows authorized would be resumed pending, and sent again")
	}

	t.Run("every event aged out after since", func(t *testing.T) {
		t.Parallel()
		w, _, env := restoreCase(t, true)
		since := afterStreams(t)
		w.submit("sent, then aged out", 1)
		stream, err := w.js.Stream(w.ctx, events.EventsStream)
		require.NoError(t, err)
		require.NoError(t, stream.Purge(w.ctx))
		refused(t, w, env, since, "holds no event")
	})

	for _, recorded := range []bool{true, false} {
		mode := ""
		if !recorded {
			mode = ", from a backup that records no witness"
		}
		// why is what the refusal says, with the witness the ledger records and without.
		why := func(withRecorded, withFirstCopy string) string {
			if recorded {
				return withRecorded
			}
			return withFirstCopy
		}
		// backup is the backup as the test takes it: the ledger as it is then.
		backup := func(w *restoreWorld) {
			if !recorded {
				w.backedUpBeforeWitnessSequences()
			}
		}

		t.Run("the stream was recreated after the backup"+mode, func(t *testing.T) {
			t.Parallel()
			w, srv, env := restoreCase(t, true)
			since := afterStreams(t)
			w.published("its authorization was on the stream that is lost")
			sent := w.submit("sent after the backup, on the stream that is lost", 1)[0]
			resumed := w.submit("claimed after the stream was recreated", 1)[0]
			backup(w)
			// After the backup, one intent is authorized (and sent) on the stream, which is then
			// lost and recreated; the other is claimed on the new one.
			w.publishEvent(sent, 2, "pending", "pending")
			w.publishEvent(sent, 3, "pending", "authorized")
			require.NoError(t, w.js.DeleteStream(w.ctx, events.EventsStream))
			require.NoError(t, streams.Ensure(w.ctx, srv.Connect(t), w.js, streams.Config{}))
			w.publishEvent(resumed, 2, "pending", "pending")
			refused(t, w, env, since, why("no longer holds the authorized event of", "no authorized event that the restored ledger holds published"))
		})

		t.Run("a message after the witness was removed"+mode, func(t *testing.T) {
			t.Parallel()
			w, _, env := restoreCase(t, true)
			since := afterStreams(t)
			_, witness := w.witnessed("the backup's last publication")
			require.Equal(t, uint64(3), witness)
			authorized := w.submit("authorized after the backup, its event removed", 1)[0]
			backup(w)
			w.publishEvent(authorized, 2, "pending", "pending")
			w.removeEvent(w.publishEvent(authorized, 3, "pending", "authorized"))
			w.submit("after it", 1)
			refused(t, w, env, since, why("after the witness at sequence 3 is missing", "the first after a message missing from it"))
		})

		// A copy of the witness's authorized event stored again after the hole (a relay cut off
		// from NATS flushes its reconnect buffer after the duplicate window) is no witness: only
		// the copy JetStream acknowledged before the send proves anything.
		t.Run("a message after the witness was removed, and a late copy of the witness stored after it"+mode, func(t *testing.T) {
			t.Parallel()
			w, _, env := restoreCase(t, true)
			since := afterStreams(t)
			_, witness := w.witnessed("the backup's last publication")
			authorized := w.submit("authorized after the backup, its event removed", 1)[0]
			backup(w)
			w.publishEvent(authorized, 2, "pending", "pending")
			w.removeEvent(w.publishEvent(authorized, 3, "pending", "authorized"))
			w.lateCopy(w.eventAt(witness))
			refused(t, w, env, since, why("after the witness at sequence 3 is missing", "the first after a message missing from it"))
			require.Equal(t, ledger.Pending, w.state(authorized))
		})
	}

	// The recreated stream holds a late copy of the witness's authorized event, and another
	// message at the witness's sequence: neither proves anything about the backup.
	t.Run("the stream was recreated after the backup, and a late copy of the witness stored on it", func(t *testing.T) {
		t.Parallel()
		w, srv, env := restoreCase(t, true)
		since := afterStreams(t)
		_, witness := w.witnessed("its authorization was on the stream that is lost")
		require.Equal(t, uint64(3), witness)
		copied := w.eventAt(witness)
		sent := w.submit("sent after the backup, on the stream that is lost", 1)[0]
		resumed := w.submit("claimed after the stream was recreated", 3)
		w.publishEvent(sent, 2, "pending", "pending")
		w.publishEvent(sent, 3, "pending", "authorized")
		require.NoError(t, w.js.DeleteStream(w.ctx, events.EventsStream))
		require.NoError(t, streams.Ensure(w.ctx, srv.Connect(t), w.js, streams.Config{}))
		require.Equal(t, uint64(1), w.lateCopy(copied))
		for _, k := range resumed {
			w.publishEvent(k, 2, "pending", "pending") // sequence 3 is the second of them
		}
		refused(t, w, env, since, "holds at sequence 3 another message than the authorized event of")
		require.Equal(t, ledger.Pending, w.state(sent))
	})

	t.Run("since is later than the restored ledger's newest history", func(t *testing.T) {
		t.Parallel()
		w, _, env := restoreCase(t, true)
		w.submit("the backup's last", 1)
		refused(t, w, env, time.Now(), "later than the newest history row")
	})

	t.Run("an intent's transitions ahead of the ledger are not all in the replay", func(t *testing.T) {
		t.Parallel()
		w, _, env := restoreCase(t, true)
		since := afterStreams(t)
		gapped := w.submit("claimed, then the claim removed from the stream", 1)[0]
		claim := w.publishEvent(gapped, 2, "pending", "pending")
		w.published("the backup's last")
		w.publishEvent(gapped, 3, "pending", "failed")
		w.removeEvent(claim) // before the witness: the replay proves complete, but lacks seq 2
		refused(t, w, env, since, gapped.String()+" (ledger at 1, the replay lacks 2 of the 3 the stream reaches)")
	})

	t.Run("an event cannot be read", func(t *testing.T) {
		t.Parallel()
		w, _, env := restoreCase(t, true)
		since := afterStreams(t)
		w.published("the backup's last publication") // stream sequences 1 to 4
		key := w.submit("behind the stream", 1)[0]
		w.publishEvent(key, 2, "pending", "pending")
		_, err := w.js.Publish(w.ctx, events.EventSubject("authorized", "acct-1"), []byte(`{"v":1,"not":"an event"}`))
		require.NoError(t, err)
		refused(t, w, env, since, events.EventSubject("authorized", "acct-1")+" seq 7")

		// Told to go on without it: it does, lists it, and still exits 1.
		res := run(env, reconcileArgs(since, append(bump, "--skip-unreadable")...)...)
		require.Equal(t, cli.ExitError, res.code, res.stdout)
		require.Contains(t, res.stderr, "unreadable events were skipped")
		require.Contains(t, res.stderr, " seq 7")
		require.Equal(t, ledger.Pending, w.state(key))
		require.Contains(t, res.stdout, "changed 1:")
	})
}

// The replay starts at the witness the restored ledger records with the highest stream
// sequence: the latest message proven stored before the backup.
func TestRestoreReconcileReplaysFromTheNewestRecordedWitness(t *testing.T) {
	t.Parallel()
	w, _, env := restoreCase(t, true)
	since := afterStreams(t)
	_, older := w.witnessed("published first")
	key, newest := w.witnessed("published last")
	require.Less(t, older, newest)
	resumed := w.submit("claimed after the backup", 1)[0]
	last := w.publishEvent(resumed, 2, "pending", "pending")
	res := run(env, reconcileArgs(since, "--bump-epoch", "--reason", "restored", "--json")...)
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var report struct {
		From     uint64                `json:"from_sequence"`
		To       uint64                `json:"to_sequence"`
		Whole    bool                  `json:"whole_stream"`
		Recorded bool                  `json:"witness_recorded"`
		Witness  ledger.StreamPosition `json:"witness"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &report), res.stdout)
	require.Equal(t, newest, report.From)
	require.Equal(t, last, report.To)
	require.True(t, report.Recorded)
	require.False(t, report.Whole)
	require.Equal(t, key, report.Witness.Key)
	require.Equal(t, newest, report.Witness.StreamSeq)
	require.Equal(t, ledger.Pending, w.state(resumed))
	in, err := w.l.Get(w.ctx, resumed)
	require.NoError(t, err)
	require.Equal(t, ledger.ReasonRestoreResumed, in.Reason)
}

// The current epoch must have been bumped after the restore: an epoch the restored data
// already holds (bumped between since and the backup), or one a worker already used, is not
// enough.
func TestRestoreReconcileRefusesAnEpochThatWasNotBumpedAfterTheRestore(t *testing.T) {
	t.Parallel()
	w, _, env := restoreCase(t, true)
	since := afterStreams(t)
	w.published("before the bump")
	_, err := w.l.BumpEpoch(w.ctx, ledger.Actor{Name: "bob", Reason: "an epoch bump before the backup"})
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

// restoreUnderSkew runs the restore protocol with the database's clock and the NATS server's
// apart: the restored ledger's history and epochs are shifted by the skew (ahead: later), as
// a database whose clock ran that far from the NATS server's would have written them, and
// --since is the latest the command accepts, the newest history row of the restored ledger.
// The sends after the backup fall within the skew; intents submitted after it do not. It
// returns the command's result, after checking that every intent the stream shows published is
// published in the restored ledger, that those submitted after the backup are recreated, and
// that a dispatcher handed work for every intent afterwards sends nothing twice. recorded false
// makes the backup one that records no witness sequence.
func restoreUnderSkew(t *testing.T, ahead, recorded bool) result {
	requireDumpTools(t)
	w, srv := sendingWorld(t)
	early := w.submit("published before the backup", 3)
	w.dispatch(early, 30*time.Second)
	waiting := w.submit("sent after the backup", 4)
	dump := w.dump()
	backup := time.Now()
	w.dispatch(waiting, 30*time.Second)
	skew := 3 * time.Second
	if ahead {
		// The sends after the backup must fall within the skew: --since, read on the NATS
		// server's clock, then lies after all of them.
		skew = max(skew, time.Since(backup)+2*time.Second)
	} else {
		skew = -skew
	}
	t.Logf("the restored ledger's times shifted by %s (the database clock that far off the NATS server's); the sends after the backup took %s", skew, time.Since(backup))
	if wait := time.Until(backup.Add(skew)); wait > 0 {
		time.Sleep(wait + 100*time.Millisecond) // past --since, read on the NATS server's clock
	}
	later := w.submit("submitted after the backup", 2)

	r := w.restore(dump)
	_, err := r.l.BumpEpoch(r.ctx, ledger.Actor{Name: "alice", Reason: "restored from the backup"})
	require.NoError(t, err)
	_, err = r.db.Pool.Exec(r.ctx, `UPDATE history SET at = at + make_interval(secs => $1)`, skew.Seconds())
	require.NoError(t, err)
	_, err = r.db.Pool.Exec(r.ctx, `UPDATE epochs SET created_at = created_at + make_interval(secs => $1)`, skew.Seconds())
	require.NoError(t, err)
	if !recorded {
		r.backedUpBeforeWitnessSequences()
	}
	var since time.Time
	require.NoError(t, r.db.Pool.QueryRow(r.ctx, `SELECT max(at) FROM history`).Scan(&since))
	if wait := time.Until(since); wait > 0 {
		time.Sleep(wait + 10*time.Millisecond) // --since must not be in the future
	}

	env := map[string]string{"ATMOST_DATABASE_URL": r.db.URL, "ATMOST_NATS_URL": srv.URL, "ATMOST_OPERATOR": "alice"}
	res := run(env, reconcileArgs(since)...)
	t.Log(res.stdout, res.stderr)
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	got, err := r.l.GetMany(r.ctx, waiting)
	require.NoError(t, err)
	for _, k := range waiting {
		require.Equal(t, ledger.Published, got[k].State, "%s: sent after the backup, and the stream shows it published", k)
		require.Equal(t, ledger.ReasonRestorePublished, got[k].Reason)
	}
	got, err = r.l.GetMany(r.ctx, later)
	require.NoError(t, err)
	for _, k := range later {
		require.Equal(t, ledger.ReasonRestoreResumed, got[k].Reason, "%s: recreated from its envelope", k)
	}
	all := append(append(append([]identity.DeliveryKey{}, early...), waiting...), later...)
	r.dispatchAgain(all)
	for _, k := range all {
		require.Equal(t, 1, r.sim.Created(k.String()), "%s: every intent exists on the platform exactly once", k)
	}
	return res
}

// Which clock runs ahead decides nothing: the replay is bounded by what the stream and the
// restored ledger hold, never by comparing a database time with a NATS time.
func TestRestoreReconcileDoesNotDependOnTheDatabaseAndNATSClocksAgreeing(t *testing.T) {
	t.Parallel()
	for name, ahead := range map[string]bool{"the database clock ahead": true, "the database clock behind": false} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res := restoreUnderSkew(t, ahead, true)
			require.Contains(t, res.stdout, "from the witness at sequence")
			require.NotContains(t, res.stderr, "from its first event")
		})
	}
}

// A backup taken before atmost recorded witness sequences names no witness: the whole stream
// is read, the witness is the first copy of an authorized event the ledger holds published,
// the command says so, and nothing is sent twice.
func TestRestoreReconcileReadsTheWholeStreamForABackupThatRecordsNoWitness(t *testing.T) {
	t.Parallel()
	res := restoreUnderSkew(t, true, false)
	require.Contains(t, res.stderr, "the restored ledger records no witness sequence")
	require.Contains(t, res.stderr, "reading ATMOST_EVENTS from its first event")
	require.Contains(t, res.stdout, "replayed 30 events of 9 intents, ATMOST_EVENTS sequences 1 to 30 (epoch 2), the whole stream")
}
