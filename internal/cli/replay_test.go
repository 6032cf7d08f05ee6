package cli_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/cli"
	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// replayWorld is a ledger with acct-1 configured, JetStream, and a real ingest in front of
// them: the rejects a replay reads are those ingest stored.
type replayWorld struct {
	*worldtest.World
	t   *testing.T
	in  *ingest.Ingester
	env map[string]string
}

func newReplayWorld(t *testing.T) *replayWorld {
	t.Helper()
	w := worldtest.New(t)
	w.Exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-1', 'sim')`)
	in, err := ingest.New(w.Ctx, w.JS, w.Ledger, ingest.Config{MaxWait: 100 * time.Millisecond})
	require.NoError(t, err)
	return &replayWorld{World: w, t: t, in: in, env: map[string]string{"ATMOST_DATABASE_URL": w.DB.URL, "ATMOST_OPERATOR": "alice"}}
}

func (w *replayWorld) run(args ...string) result { return run(w.env, args...) }

// publish puts a message on subject and returns JetStream's acknowledgement.
func (w *replayWorld) publish(subject, body string, header nats.Header) *jetstream.PubAck {
	w.T.Helper()
	ack, err := w.JS.PublishMsg(w.Ctx, &nats.Msg{Subject: subject, Data: []byte(body), Header: header})
	require.NoError(w.T, err)
	return ack
}

// ingest runs batches until the stream is dry and returns what they did.
func (w *replayWorld) ingest() ingest.Stats {
	w.T.Helper()
	var total ingest.Stats
	for range 50 {
		s, err := w.in.Batch(w.Ctx)
		require.NoError(w.T, err)
		if s == (ingest.Stats{}) {
			return total
		}
		total.Created += s.Created
		total.Duplicates += s.Duplicates
		total.Rejected += s.Rejected
	}
	w.T.Fatal("the stream never ran dry")
	return total
}

func envelopeOf(t *testing.T, body string) identity.Envelope {
	t.Helper()
	e, err := identity.ParseEnvelope([]byte(body))
	require.NoError(t, err)
	return e
}

func postOf(account, text string) string {
	return fmt.Sprintf(`{"v":1,"account":%q,"action":"post","request":{"text":%q}}`, account, text)
}

// replayOutput is rejects replay --json's report.
type replayOutput struct {
	DryRun   bool           `json:"dry_run"`
	Again    bool           `json:"again"`
	Operator string         `json:"operator"`
	Reason   string         `json:"reason"`
	Totals   map[string]int `json:"totals"`
	Event    string         `json:"event"`
	Rejects  []struct {
		ID          string `json:"id"`
		StreamSeq   int64  `json:"stream_seq"`
		Reason      string `json:"reason"`
		Outcome     string `json:"outcome"`
		Account     string `json:"account"`
		DeliveryKey string `json:"delivery_key"`
		ReasonNow   string `json:"reason_now"`
		DetailNow   string `json:"detail_now"`
		ReplayedBy  string `json:"replayed_by"`
		Why         string `json:"why"`
	} `json:"rejects"`
}

func (w *replayWorld) replayJSON(args ...string) replayOutput {
	w.T.Helper()
	res := w.run(append([]string{"rejects", "replay", "--json"}, args...)...)
	require.Equal(w.T, cli.ExitOK, res.code, res.stderr)
	requireSnakeCase(w.t, res.stdout)
	var out replayOutput
	require.NoError(w.T, json.Unmarshal([]byte(res.stdout), &out), res.stdout)
	return out
}

// outcomes lists each reject's stream sequence and outcome (with the reason now of a refusal).
func (o replayOutput) outcomes() []string {
	var out []string
	for _, r := range o.Rejects {
		s := fmt.Sprintf("%d %s %s", r.StreamSeq, r.Reason, r.Outcome)
		if r.ReasonNow != "" {
			s += " " + r.ReasonNow
		}
		out = append(out, s)
	}
	return out
}

func totals(created, alreadyStored, refused, skipped, notReplayable int) map[string]int {
	return map[string]int{"created": created, "already_stored": alreadyStored, "refused": refused, "skipped": skipped, "not_replayable": notReplayable}
}

// Messages ingest refused while acct-9 did not exist are replayed once it does: through
// ingest's own parse (the subject must still be the account's, the delivery-key header must
// still be the key), into the ledger as ingest stores an intent, with the operator and the
// reason in the control history. The producer's own fix, published again under the refused
// message's Nats-Msg-Id inside JetStream's duplicate window, never reached ingest: the replay
// is what stores it. The created intents' events and work items are published by the relay. A
// second replay skips what the first stored, and tries again what is still refused; --again
// replays the stored ones and finds their intents stored.
func TestRejectsReplayStoresWhatIngestRefusedOnceTheCauseIsFixed(t *testing.T) {
	t.Parallel()
	w := newReplayWorld(t)
	one, two := postOf("acct-9", "nine one"), postOf("acct-9", "nine two")
	oneKey, twoKey := envelopeOf(t, one).DeliveryKey(), envelopeOf(t, two).DeliveryKey()
	w.publish(events.IntentSubject("acct-9"), one, nats.Header{jetstream.MsgIDHeader: {"nine-1"}, "Trace": {"caf\xe9 \xff"}})
	w.publish(events.IntentSubject("acct-9"), two, nats.Header{jetstream.MsgIDHeader: {"nine-2"}, identity.DeliveryKeyHeader: {twoKey.String()}})
	w.publish(events.IntentSubject("acct-1"), postOf("acct-9", "sneaky"), nil)
	w.publish(events.IntentSubject("acct-9"), postOf("acct-9", "wrong key"), nats.Header{identity.DeliveryKeyHeader: {oneKey.String()}})
	w.publish(events.IntentSubject("acct-1"), `{"v":1,`, nil)
	require.Equal(t, ingest.Stats{Rejected: 5}, w.ingest())

	before := w.replayJSON("--reason-text", "look first", "--dry-run")
	require.True(t, before.DryRun)
	require.Equal(t, []string{"1 unknown_account refused unknown_account", "2 unknown_account refused unknown_account",
		"3 subject_mismatch refused subject_mismatch", "4 key_mismatch refused key_mismatch", "5 malformed_json refused malformed_json"}, before.outcomes())
	require.Equal(t, `account "acct-9" is not configured`, before.Rejects[0].DetailNow)

	res := w.run("accounts", "add", "acct-9", "--platform", "sim", "--settings", `{"url":"http://127.0.0.1:9"}`, "--reason", "the producer asked for it")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	// The producer fixes nothing itself but publishes again, under the refused message's id.
	ack := w.publish(events.IntentSubject("acct-9"), one, nats.Header{jetstream.MsgIDHeader: {"nine-1"}})
	require.True(t, ack.Duplicate, "JetStream drops it: inside the duplicate window it is the refused message again")
	require.Equal(t, ingest.Stats{}, w.ingest())

	dry := w.replayJSON("--reason-text", "acct-9 added", "--dry-run")
	require.Equal(t, totals(2, 0, 3, 0, 0), dry.Totals)
	require.Equal(t, "none", dry.Event)
	require.Zero(t, w.Count(`SELECT count(*) FROM intents`), "a dry run changes nothing")
	require.Zero(t, w.Count(`SELECT count(*) FROM control_history WHERE kind = 'reject_replay'`))

	res = w.run("rejects", "replay", "--reason-text", "acct-9 added (OPS-7)")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	require.Len(t, lines, 8, res.stdout)
	require.Regexp(t, `^SEQ\s+REASON\s+ACCOUNT\s+OUTCOME\s+NOW$`, lines[0])
	require.Regexp(t, `^1\s+unknown_account\s+acct-9\s+created\s+`+oneKey.String()+`$`, lines[1])
	require.Regexp(t, `^2\s+unknown_account\s+acct-9\s+created\s+`+twoKey.String()+`$`, lines[2])
	require.Regexp(t, `^3\s+subject_mismatch\s+acct-9\s+refused\s+subject_mismatch: account "acct-9" is published on atmost.intent.acct-9; this message came on "atmost.intent.acct-1"$`, lines[3])
	require.Regexp(t, `^4\s+key_mismatch\s+acct-9\s+refused\s+key_mismatch: `, lines[4])
	require.Regexp(t, `^5\s+malformed_json\s+-\s+refused\s+malformed_json: `, lines[5])
	require.Equal(t, "replayed 5 rejects: created 2, already stored 0, refused again 3; skipped 0 (replayed before; --again replays them); not replayable 0", lines[6])
	require.Equal(t, "the created intents' events and work items are published by the next relay round (a running ingest or sweeper drains the outbox)", lines[7])

	for _, key := range []identity.DeliveryKey{oneKey, twoKey} {
		in := w.Intent(key)
		require.Equal(t, ledger.Pending, in.State)
		require.Equal(t, "acct-9", in.Account)
	}
	require.Equal(t, 2, w.Count(`SELECT count(*) FROM intents`), "the subject and the header still bind: nothing else was stored")
	require.Equal(t, 2, w.Count(`SELECT count(*) FROM history WHERE actor = 'alice' AND reason = 'submitted'`), "the operator stored them")

	res = w.run("controls", "log", "--kind", "reject_replay")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Equal(t, 6, strings.Count(res.stdout, "\n"), res.stdout)
	require.Contains(t, res.stdout, "ATMOST_INTENTS 1 unknown_account -> created "+oneKey.String())
	require.Contains(t, res.stdout, "ATMOST_INTENTS 3 subject_mismatch -> refused subject_mismatch")
	require.Contains(t, res.stdout, "acct-9 added (OPS-7)")

	// A running role's relay publishes each created intent's event and work item.
	_, err := w.Relay.Drain(w.Ctx)
	require.NoError(t, err)
	dispatch, err := w.JS.Stream(w.Ctx, events.DispatchStream)
	require.NoError(t, err)
	info, err := dispatch.Info(w.Ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, info.State.Msgs, "a work item for each created intent")
	res = run(map[string]string{"ATMOST_NATS_URL": w.NATSURL}, "events", "tail", "--subject", "atmost.event.pending.>", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	evs := eventLines(t, res.stdout)
	require.Len(t, evs, 2)
	for _, ev := range evs {
		require.Equal(t, "alice", ev.Actor)
		require.Contains(t, []identity.DeliveryKey{oneKey, twoKey}, ev.DeliveryKey)
	}

	again := w.replayJSON("--reason-text", "once more")
	require.Equal(t, totals(0, 0, 3, 2, 0), again.Totals, "what was stored is skipped, what is refused is tried again")
	require.Equal(t, "alice", again.Rejects[0].ReplayedBy)
	require.Equal(t, oneKey.String(), again.Rejects[0].DeliveryKey)
	require.Equal(t, "none", again.Event)

	forced := w.replayJSON("--reason-text", "check", "--again", "--reason", "unknown_account", "--operator", "bob")
	require.True(t, forced.Again)
	require.Equal(t, "bob", forced.Operator)
	require.Equal(t, []string{"1 unknown_account already_stored", "2 unknown_account already_stored"}, forced.outcomes())
	require.Equal(t, 2, w.Count(`SELECT count(*) FROM intents`))
	require.Equal(t, 2, w.Count(`SELECT count(*) FROM history`), "the stored intents are untouched")
	require.Equal(t, 10, w.Count(`SELECT count(*) FROM control_history WHERE kind = 'reject_replay'`), "5, the 3 refused again (a skip writes none), the 2 asked for again")
}

// A producer that published its fixed intent again under a new message id stored it through
// ingest: the replay of its reject finds the intent stored, creates nothing, and marks the
// reject, which the next replay skips.
func TestRejectsReplayFindsTheIntentItsProducerPublishedSince(t *testing.T) {
	t.Parallel()
	w := newReplayWorld(t)
	body := postOf("acct-9", "published since")
	w.publish(events.IntentSubject("acct-9"), body, nats.Header{jetstream.MsgIDHeader: {"first"}})
	require.Equal(t, ingest.Stats{Rejected: 1}, w.ingest())
	w.Exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-9', 'sim')`)
	w.publish(events.IntentSubject("acct-9"), body, nats.Header{jetstream.MsgIDHeader: {"first-again"}})
	require.Equal(t, ingest.Stats{Created: 1}, w.ingest())

	out := w.replayJSON("--reason-text", "acct-9 added", "--account", "acct-9")
	require.Equal(t, []string{"1 unknown_account already_stored"}, out.outcomes())
	require.Equal(t, envelopeOf(t, body).DeliveryKey().String(), out.Rejects[0].DeliveryKey)
	require.Equal(t, 1, w.Count(`SELECT count(*) FROM intents`))
	require.Equal(t, totals(0, 0, 0, 1, 0), w.replayJSON("--reason-text", "again").Totals)
}

// --account, --since and --limit choose the rejects; what the ledger no longer holds whole is
// reported, never guessed at: an unstorable message (no bytes kept), an invalid header block
// (the headers were not kept, so the key header cannot be checked), a message of which only the
// first 64 KiB were kept, and bytes that no longer match their SHA-256.
func TestRejectsReplayChoosesAndLeavesWhatItCannotJudgeAgain(t *testing.T) {
	t.Parallel()
	w := newReplayWorld(t)
	w.publish(events.IntentSubject("acct-9"), postOf("acct-9", "nine"), nil)
	w.publish(events.IntentSubject("acct-8"), postOf("acct-8", "eight"), nil)
	w.publish(events.IntentSubject("acct-9"), postOf("acct-9", "nine, tampered"), nil)
	require.Equal(t, ingest.Stats{Rejected: 3}, w.ingest())
	w.Exec(`UPDATE rejects SET raw = convert_to(replace(convert_from(raw, 'UTF8'), 'tampered', 'tempered'), 'UTF8') WHERE stream_seq = 3`)
	_, err := w.Ledger.Reject(w.Ctx, []ledger.Rejection{
		{Reason: string(identity.ReasonUnstorable), Detail: "refused 5 times", Stream: events.IntentsStream, StreamSeq: 10, Raw: []byte(postOf("acct-9", "x")), DigestOnly: true},
		{Reason: string(identity.ReasonInvalidHeader), Detail: "the NATS header block (9 bytes) does not parse", Subject: events.IntentSubject("acct-9"), Stream: events.IntentsStream, StreamSeq: 11, Raw: []byte(postOf("acct-9", "y"))},
		{Reason: string(identity.ReasonTooLarge), Detail: "over 64 KiB", Subject: events.IntentSubject("acct-9"), Stream: events.IntentsStream, StreamSeq: 12, Raw: []byte(postOf("acct-9", strings.Repeat("z", ledger.MaxRejectRaw)))},
	})
	require.NoError(t, err)
	w.Exec(`UPDATE rejects SET received_at = now() - INTERVAL '3 hours' WHERE stream_seq = 1`)
	w.Exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-9', 'sim'), ('acct-8', 'sim')`)

	out := w.replayJSON("--reason-text", "r", "--dry-run")
	require.Equal(t, []string{"1 unknown_account created", "2 unknown_account created", "3 unknown_account not_replayable",
		"10 unstorable not_replayable", "11 invalid_header not_replayable", "12 too_large not_replayable"}, out.outcomes())
	require.Equal(t, "its stored bytes do not match the SHA-256 recorded with them", out.Rejects[2].Why)
	require.Contains(t, out.Rejects[3].Why, "only its size and SHA-256 were kept")
	require.Contains(t, out.Rejects[4].Why, "the delivery-key header cannot be checked again")
	require.Equal(t, fmt.Sprintf("only the first %d of its %d bytes were kept", ledger.MaxRejectRaw, len(postOf("acct-9", strings.Repeat("z", ledger.MaxRejectRaw)))), out.Rejects[5].Why)

	require.Equal(t, []string{"1 unknown_account created"}, w.replayJSON("--reason-text", "r", "--dry-run", "--account", "acct-9").outcomes()[:1])
	require.Equal(t, []string{"1 unknown_account created"}, w.replayJSON("--reason-text", "r", "--dry-run", "--account", "acct-9", "--limit", "1").outcomes())
	require.Equal(t, []string{"2 unknown_account created"}, w.replayJSON("--reason-text", "r", "--dry-run", "--account", "acct-8").outcomes())
	require.Equal(t, []string{"2 unknown_account created", "3 unknown_account not_replayable"}, w.replayJSON("--reason-text", "r", "--dry-run", "--since", "1h", "--reason", "unknown_account").outcomes())

	// Only acct-8's, now, and published right away on the NATS server named.
	w.env["ATMOST_NATS_URL"] = w.NATSURL
	out = w.replayJSON("--reason-text", "acct-8 added", "--account", "acct-8")
	require.Equal(t, []string{"2 unknown_account created"}, out.outcomes())
	require.Equal(t, "published", out.Event)
	require.Zero(t, w.Count(`SELECT count(*) FROM outbox`), "published and removed from the outbox")
	require.Equal(t, 1, w.Count(`SELECT count(*) FROM intents WHERE account_id = 'acct-8'`))
	require.Zero(t, w.Count(`SELECT count(*) FROM intents WHERE account_id = 'acct-9'`))
}

// A long run notes its progress on standard error after each page, and every page is one
// transaction of its own: what the run replayed before is kept. Not parallel: it changes the
// paging of every replay.
func TestRejectsReplayNotesItsProgressPageByPage(t *testing.T) {
	cli.SetReplayPaging(t, 2, 0)
	w := newReplayWorld(t)
	for i := range 5 {
		w.publish(events.IntentSubject("acct-9"), postOf("acct-9", fmt.Sprintf("page %d", i)), nil)
	}
	require.Equal(t, ingest.Stats{Rejected: 5}, w.ingest())
	w.Exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-9', 'sim')`)

	res := w.run("rejects", "replay", "--reason-text", "acct-9 added")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Equal(t, "atmost rejects replay: progress: 2 of 5 rejects read: created 2, already stored 0, refused 0, skipped 0, not replayable 0\n"+
		"atmost rejects replay: progress: 4 of 5 rejects read: created 4, already stored 0, refused 0, skipped 0, not replayable 0\n", res.stderr)
	require.Contains(t, res.stdout, "replayed 5 rejects: created 5")
	require.Equal(t, 5, w.Count(`SELECT count(*) FROM intents`))

	res = w.run("rejects", "replay", "--reason-text", "again", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	for _, line := range strings.Split(strings.TrimSpace(res.stderr), "\n") {
		var note struct{ Note, Command string }
		require.NoError(t, json.Unmarshal([]byte(line), &note), "with --json each note is a JSON object: %s", line)
		require.Equal(t, "atmost rejects replay", note.Command)
		require.True(t, strings.HasPrefix(note.Note, "progress: "), note.Note)
	}
}

// A bad command line exits 2 and replays nothing.
func TestRejectsReplayRefusesABadCommandLine(t *testing.T) {
	t.Parallel()
	w := newReplayWorld(t)
	w.publish(events.IntentSubject("acct-9"), postOf("acct-9", "nine"), nil)
	require.Equal(t, ingest.Stats{Rejected: 1}, w.ingest())
	w.Exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-9', 'sim')`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rejects", "replay"}, "--reason-text is required"},
		{[]string{"rejects", "replay", "--reason-text", "  "}, "--reason-text is required"},
		{[]string{"rejects", "replay", "--reason-text", "x", "--reason", "bogus"}, "give one of malformed_json"},
		{[]string{"rejects", "replay", "--reason-text", "x", "--account", " "}, "--account is empty"},
		{[]string{"rejects", "replay", "--reason-text", "x", "--since", "yesterday"}, "give a duration back from now"},
		{[]string{"rejects", "replay", "--reason-text", "x", "--limit", "-1"}, "--limit -1"},
		{[]string{"rejects", "replay", "--reason-text", "x", "--reason", "unknown_account", "extra"}, "unexpected argument"},
	} {
		res := w.run(tc.args...)
		require.Equal(t, cli.ExitUsage, res.code, "atmost %q: %s", tc.args, res.stderr)
		require.Contains(t, res.stderr, tc.want, "atmost %q", tc.args)
	}
	require.Zero(t, w.Count(`SELECT count(*) FROM intents`))
	require.Zero(t, w.Count(`SELECT count(*) FROM control_history`))
}
