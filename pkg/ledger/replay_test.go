package ledger_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// storeReject stores a message ingest refused as unknown_account (its envelope valid, its
// account not configured), at sequence seq of ATMOST_INTENTS, and returns the stored reject.
func (e *env) storeReject(acct, text string, seq int64) ledger.ReplayCandidate {
	e.t.Helper()
	body := fmt.Sprintf(`{"v":1,"account":%q,"action":"post","request":{"text":%q}}`, acct, text)
	refusal := ledger.UnknownAccountRefusal(acct)
	_, err := e.l.Reject(e.ctx, []ledger.Rejection{{Reason: string(refusal.Reason), Detail: refusal.Detail, Subject: events.IntentSubject(acct),
		Stream: events.IntentsStream, StreamSeq: seq, Raw: []byte(body)}})
	require.NoError(e.t, err)
	for _, c := range e.rejectsToReplay(ledger.RejectSelection{}) {
		if c.StreamSeq == seq {
			return c
		}
	}
	e.t.Fatalf("reject at %d not found", seq)
	return ledger.ReplayCandidate{}
}

func (e *env) rejectsToReplay(sel ledger.RejectSelection) []ledger.ReplayCandidate {
	e.t.Helper()
	var out []ledger.ReplayCandidate
	after := ledger.RejectCursor{}
	for {
		page, err := e.l.RejectsToReplay(e.ctx, sel, after, 2)
		require.NoError(e.t, err)
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		last := page[len(page)-1]
		after = ledger.RejectCursor{Stream: last.Stream, Seq: last.StreamSeq}
	}
}

// replayItem parses a stored reject's bytes again, as a replay does (the subject and header
// checks are ingest's, and hold for these messages).
func replayItem(t testing.TB, c ledger.ReplayCandidate) ledger.ReplayItem {
	t.Helper()
	env, err := identity.ParseEnvelope(c.Raw)
	if err != nil {
		var rej *identity.RejectError
		require.ErrorAs(t, err, &rej)
		return ledger.ReplayItem{RejectID: c.ID, Refusal: rej}
	}
	return ledger.ReplayItem{RejectID: c.ID, Envelope: &env}
}

func (e *env) replay(l *ledger.Ledger, opts ledger.ReplayOptions, cs ...ledger.ReplayCandidate) []ledger.ReplayResult {
	e.t.Helper()
	items := make([]ledger.ReplayItem, len(cs))
	for i, c := range cs {
		items[i] = replayItem(e.t, c)
	}
	res, err := l.ReplayRejects(e.ctx, items, opts)
	require.NoError(e.t, err)
	require.Len(e.t, res, len(cs))
	return res
}

func (e *env) replayRows(rejectID string) []ledger.ControlChange {
	e.t.Helper()
	all, err := e.l.ControlHistory(e.ctx, ledger.ReplayKind, 1000)
	require.NoError(e.t, err)
	var out []ledger.ControlChange
	for _, ch := range all {
		if ch.Scope == rejectID {
			out = append(out, ch)
		}
	}
	return out
}

var alice = ledger.ReplayOptions{Actor: "alice", Reason: "acct-9 is configured now"}

// A reject refused for an account that did not exist is replayed once the account exists: the
// replay refused again leaves it unmarked, the one after the fix creates the intent (pending,
// its first history row by the operator, its outbox row a dispatch work item), a second replay
// skips it, and one asked to replay it again finds the intent stored. Each replay is a row of
// the control history.
func TestAReplayCreatesTheIntentOnceItsCauseIsFixed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.storeReject("acct-9", "hello from nine", 7)
	require.Nil(t, r.Replayed)

	res := e.replay(e.l, alice, r)
	require.Equal(t, ledger.ReplayRefused, res[0].Outcome)
	require.Equal(t, identity.ReasonUnknownAccount, res[0].Refusal.Reason)
	require.Equal(t, `account "acct-9" is not configured`, res[0].Refusal.Detail)
	require.Equal(t, "acct-9", res[0].Account)
	key := *res[0].Key
	require.Zero(t, e.count(`SELECT count(*) FROM intents`))
	rows := e.replayRows(r.ID)
	require.Len(t, rows, 1, "a replay refused again is written to the control history")
	require.Equal(t, "alice", rows[0].Actor)
	require.Equal(t, "acct-9 is configured now", rows[0].Reason)
	require.JSONEq(t, `{"reason":"unknown_account","detail":"account \"acct-9\" is not configured","stream":"ATMOST_INTENTS","stream_seq":7}`, string(rows[0].Before))
	require.JSONEq(t, fmt.Sprintf(`{"outcome":"refused","account":"acct-9","delivery_key":%q,"reason":"unknown_account","detail":"account \"acct-9\" is not configured"}`, key), string(rows[0].After))
	require.Nil(t, e.storeRejectCandidate(r.ID).Replayed, "a refusal marks nothing")

	e.exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-9', 'sim')`)
	res = e.replay(e.l, alice, r)
	require.Equal(t, ledger.ReplayCreated, res[0].Outcome)
	require.Equal(t, key, *res[0].Key)
	require.Nil(t, res[0].Refusal)
	in, err := e.l.Get(e.ctx, key)
	require.NoError(t, err)
	require.Equal(t, ledger.Pending, in.State)
	require.Equal(t, "acct-9", in.Account)
	rec, err := e.l.Inspect(e.ctx, key)
	require.NoError(t, err)
	require.Len(t, rec.Transitions, 1)
	require.Equal(t, ledger.ReasonSubmitted, rec.Transitions[0].Reason)
	require.Equal(t, "alice", rec.Transitions[0].Actor, "the operator stored it")
	require.Equal(t, 1, e.count(`SELECT count(*) FROM outbox WHERE delivery_key = $1 AND dispatch`, key.Bytes()), "its event and work item wait for the relay")

	mark := e.storeRejectCandidate(r.ID).Replayed
	require.NotNil(t, mark)
	require.Equal(t, "alice", mark.Actor)
	require.Equal(t, ledger.ReplayCreated, mark.Outcome)
	require.Equal(t, key, *mark.Key)

	bob := ledger.ReplayOptions{Actor: "bob", Reason: "once more"}
	res = e.replay(e.l, bob, r)
	require.Equal(t, ledger.ReplaySkipped, res[0].Outcome)
	require.Equal(t, "alice", res[0].Replayed.Actor)
	require.Equal(t, ledger.ReplayCreated, res[0].Replayed.Outcome)
	require.Len(t, e.replayRows(r.ID), 2, "a skipped reject writes nothing")

	bob.Again = true
	res = e.replay(e.l, bob, r)
	require.Equal(t, ledger.ReplayAlreadyStored, res[0].Outcome)
	require.Equal(t, key, *res[0].Key)
	rows = e.replayRows(r.ID)
	require.Len(t, rows, 3)
	require.Equal(t, "bob", rows[0].Actor, "newest first")
	require.JSONEq(t, fmt.Sprintf(`{"outcome":"already_stored","account":"acct-9","delivery_key":%q,"reason":null,"detail":null}`, key), string(rows[0].After))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM intents`))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM history`))
}

func (e *env) storeRejectCandidate(id string) ledger.ReplayCandidate {
	e.t.Helper()
	for _, c := range e.rejectsToReplay(ledger.RejectSelection{}) {
		if c.ID == id {
			return c
		}
	}
	e.t.Fatalf("reject %s not found", id)
	return ledger.ReplayCandidate{}
}

// A producer that published the intent again itself (under a new message id, after the account
// was added) stored it first: the replay finds it stored and creates nothing.
func TestAReplayOfARejectWhoseIntentWasPublishedSinceCreatesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.storeReject("acct-9", "published since", 3)
	e.exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-9', 'sim')`)
	sub, err := e.l.Submit(e.ctx, []identity.Envelope{envelope(t, "acct-9", "published since")})
	require.NoError(t, err)
	require.Equal(t, ledger.Created, sub[0].Outcome)

	res := e.replay(e.l, alice, r)
	require.Equal(t, ledger.ReplayAlreadyStored, res[0].Outcome)
	require.Equal(t, sub[0].Key, *res[0].Key)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM intents`))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM history`), "the stored intent is untouched")
	require.Equal(t, ledger.ReplayAlreadyStored, e.storeRejectCandidate(r.ID).Replayed.Outcome, "finding it stored marks the reject too")
	res = e.replay(e.l, alice, r)
	require.Equal(t, ledger.ReplaySkipped, res[0].Outcome)
}

// Two rejects of one intent (the producer published it twice before the account existed), in
// one replay: the first creates it, the second finds it stored; a message that is no valid
// envelope is refused for its reason now.
func TestAReplayAnswersEachRejectOfABatchInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.storeReject("acct-9", "twice", 1)
	second := e.storeReject("acct-9", "twice", 2)
	_, err := e.l.Reject(e.ctx, []ledger.Rejection{{Reason: "malformed_json", Detail: "unexpected end of JSON input", Subject: "atmost.intent.acct-9",
		Stream: events.IntentsStream, StreamSeq: 3, Raw: []byte(`{"v":1,`)}})
	require.NoError(t, err)
	all := e.rejectsToReplay(ledger.RejectSelection{})
	require.Len(t, all, 3)
	require.Equal(t, []int64{1, 2, 3}, []int64{all[0].StreamSeq, all[1].StreamSeq, all[2].StreamSeq}, "in the order ingest read them")
	e.exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-9', 'sim')`)

	res := e.replay(e.l, alice, all...)
	require.Equal(t, first.ID, res[0].RejectID)
	require.Equal(t, ledger.ReplayCreated, res[0].Outcome)
	require.Equal(t, second.ID, res[1].RejectID)
	require.Equal(t, ledger.ReplayAlreadyStored, res[1].Outcome)
	require.Equal(t, *res[0].Key, *res[1].Key)
	require.Equal(t, ledger.ReplayRefused, res[2].Outcome)
	require.Equal(t, identity.ReasonMalformedJSON, res[2].Refusal.Reason)
	require.Nil(t, res[2].Key)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM intents`))
	require.Equal(t, 3, e.count(`SELECT count(*) FROM control_history WHERE kind = 'reject_replay'`))
}

// A dry run answers as the replay would, and changes nothing.
func TestADryRunReplayChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.storeReject("acct-9", "dry", 1)
	e.exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-9', 'sim')`)
	dry := alice
	dry.DryRun = true
	res := e.replay(e.l, dry, r)
	require.Equal(t, ledger.ReplayCreated, res[0].Outcome)
	require.Zero(t, e.count(`SELECT count(*) FROM intents`))
	require.Zero(t, e.count(`SELECT count(*) FROM outbox`))
	require.Zero(t, e.count(`SELECT count(*) FROM control_history`))
	require.Equal(t, ledger.ReplayCreated, e.replay(e.l, alice, r)[0].Outcome)
}

// What the ledger cannot take is refused before anything is written: an id of no reject, the
// same reject twice, an item with neither envelope nor refusal, no operator.
func TestAReplayOfWhatIsNoStoredRejectWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.storeReject("acct-1", "known account", 1)
	item := replayItem(t, r)
	_, err := e.l.ReplayRejects(e.ctx, []ledger.ReplayItem{item, {RejectID: "00000000-0000-0000-0000-000000000000", Refusal: &identity.RejectError{Reason: identity.ReasonMalformedJSON, Detail: "x"}}}, alice)
	require.ErrorIs(t, err, ledger.ErrNotFound)
	for _, items := range [][]ledger.ReplayItem{{item, item}, {{RejectID: r.ID}}} {
		_, err = e.l.ReplayRejects(e.ctx, items, alice)
		require.Error(t, err)
	}
	_, err = e.l.ReplayRejects(e.ctx, []ledger.ReplayItem{item}, ledger.ReplayOptions{Actor: " "})
	require.ErrorContains(t, err, "an operator must be named")
	require.Zero(t, e.count(`SELECT count(*) FROM intents`))
	require.Zero(t, e.count(`SELECT count(*) FROM control_history`))
}

// The page a replay reads: of one reason, received since a time, after a cursor; each with
// every byte the ledger kept.
func TestRejectsToReplaySelectByReasonAndTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := e.storeReject("acct-9", "old", 1)
	e.exec(`UPDATE rejects SET received_at = now() - INTERVAL '2 hours' WHERE reject_id = $1`, old.ID)
	recent := e.storeReject("acct-9", "recent", 2)
	_, err := e.l.Reject(e.ctx, []ledger.Rejection{{Reason: "malformed_json", Stream: events.IntentsStream, StreamSeq: 3, Raw: []byte("{")}})
	require.NoError(t, err)

	ids := func(cs []ledger.ReplayCandidate) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	require.Len(t, e.rejectsToReplay(ledger.RejectSelection{}), 3)
	require.Equal(t, []string{old.ID, recent.ID}, ids(e.rejectsToReplay(ledger.RejectSelection{Reason: "unknown_account"})))
	hourAgo := time.Now().Add(-time.Hour)
	require.Equal(t, []string{recent.ID}, ids(e.rejectsToReplay(ledger.RejectSelection{Reason: "unknown_account", Since: hourAgo})))
	n, err := e.l.CountRejectsToReplay(e.ctx, ledger.RejectSelection{Since: hourAgo})
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	require.Equal(t, fmt.Sprintf(`{"v":1,"account":"acct-9","action":"post","request":{"text":%q}}`, "recent"), string(recent.Raw))
	require.Equal(t, len(recent.Raw), recent.Size)
}

// Two operators replay the same rejects at once, at both isolation levels: each intent is
// created exactly once, by one of them; every other replay finds it stored, or, once the first
// committed, skips the reject as replayed. Nothing fails, and exactly one control history row
// per reject says created.
func TestConcurrentReplaysOfARejectCreateOneIntent(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		e.exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-9', 'sim')`)
		var rejects []ledger.ReplayCandidate
		for i := range 4 {
			rejects = append(rejects, e.storeReject("acct-9", fmt.Sprintf("raced %d", i), int64(i+1)))
		}
		// The last one's intent is also published by its producer meanwhile.
		producer := e.ledgerWith(ledger.Config{Actor: "ingest/1"})

		const replayers = 6
		var wg sync.WaitGroup
		start := make(chan struct{})
		results := make([][]ledger.ReplayResult, replayers)
		errs := make([]error, replayers)
		for i := range replayers {
			l := e.ledgerWith(ledger.Config{Actor: "cli"})
			items := make([]ledger.ReplayItem, len(rejects))
			for j, c := range rejects {
				items[j] = replayItem(t, c)
			}
			wg.Go(func() {
				<-start
				results[i], errs[i] = l.ReplayRejects(e.ctx, items, ledger.ReplayOptions{Actor: fmt.Sprintf("operator-%d", i), Reason: "race"})
			})
		}
		var producerErr error
		wg.Go(func() {
			<-start
			_, producerErr = producer.Submit(e.ctx, []identity.Envelope{envelope(t, "acct-9", "raced 3")})
		})
		close(start)
		wg.Wait()
		require.NoError(t, producerErr)
		for _, err := range errs {
			require.NoError(t, err)
		}

		require.Equal(t, len(rejects), e.count(`SELECT count(*) FROM intents`), "one intent per key, however many replayed it")
		for j, c := range rejects {
			created, skipped := 0, 0
			for i := range replayers {
				r := results[i][j]
				require.Equal(t, c.ID, r.RejectID)
				require.NotNil(t, r.Key)
				switch r.Outcome {
				case ledger.ReplayCreated:
					created++
				case ledger.ReplayAlreadyStored:
				case ledger.ReplaySkipped:
					skipped++
					require.NotNil(t, r.Replayed, "a skip names the replay that stored it")
				default:
					t.Fatalf("reject %d: replay %d answered %s", j, i, r.Outcome)
				}
			}
			t.Logf("reject %d: created %d skipped %d", j, created, skipped)
			if j < len(rejects)-1 {
				require.Equal(t, 1, created, "reject %d: exactly one replay created it", j)
			} else {
				require.LessOrEqual(t, created, 1, "the producer may have stored it first")
			}
			require.Equal(t, created, e.count(`SELECT count(*) FROM control_history WHERE kind = 'reject_replay' AND scope = $1 AND after->>'outcome' = 'created'`, c.ID))
			require.Equal(t, replayers-skipped, e.count(`SELECT count(*) FROM control_history WHERE kind = 'reject_replay' AND scope = $1`, c.ID),
				"every replay not skipped has its row")
		}
		var bad []string
		rows, err := e.pool.Query(e.ctx, `SELECT after::TEXT FROM control_history WHERE kind = 'reject_replay'`)
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var after string
			require.NoError(t, rows.Scan(&after))
			var a struct{ Outcome string }
			require.NoError(t, json.Unmarshal([]byte(after), &a))
			if a.Outcome != "created" && a.Outcome != "already_stored" {
				bad = append(bad, after)
			}
		}
		require.NoError(t, rows.Err())
		require.Empty(t, bad, "a replay of a configured account's valid envelope is never refused")
	})
}
