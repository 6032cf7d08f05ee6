package ledger_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"testing/quick"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

func TestListIntentsPagesInKeyOrderAndFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-2', 'sim')`)
	var keys []identity.DeliveryKey
	for i := range 5 {
		keys = append(keys, e.submit(fmt.Sprintf("one %d", i)))
	}
	res, err := e.l.Submit(e.ctx, []identity.Envelope{envelope(t, "acct-2", "two")})
	require.NoError(t, err)
	other := res[0].Key
	failed := e.authorized("failed")
	_, err = e.l.Complete(e.ctx, failed, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed})
	require.NoError(t, err)

	// Every intent, two at a time: each page starts after the last key of the one before.
	var seen []identity.DeliveryKey
	var after identity.DeliveryKey
	for {
		page, err := e.l.ListIntents(e.ctx, ledger.IntentFilter{After: after}, 2)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 2)
		for _, in := range page {
			seen = append(seen, in.Key)
		}
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].Key
	}
	require.Len(t, seen, 7, "every intent once")
	require.Subset(t, seen, append(keys, other, failed.Key))
	for i := 1; i < len(seen); i++ {
		require.Negative(t, bytes.Compare(seen[i-1].Bytes(), seen[i].Bytes()), "delivery-key order")
	}

	page, err := e.l.ListIntents(e.ctx, ledger.IntentFilter{Account: "acct-2"}, 10)
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, other, page[0].Key)

	page, err = e.l.ListIntents(e.ctx, ledger.IntentFilter{State: ledger.Failed, Account: account}, 10)
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, failed.Key, page[0].Key)
	require.Equal(t, ledger.ReasonConnectionFailed, page[0].Reason)
	require.Equal(t, 1, page[0].AttemptsAuthorized)

	page, err = e.l.ListIntents(e.ctx, ledger.IntentFilter{State: ledger.Pending, Account: "acct-2"}, 10)
	require.NoError(t, err)
	require.Len(t, page, 1)

	_, err = e.l.ListIntents(e.ctx, ledger.IntentFilter{State: "lost"}, 10)
	require.ErrorContains(t, err, "not a state")
}

func TestRejectsListNewestFirstByReason(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	big := bytes.Repeat([]byte("x"), ledger.RejectPreviewBytes+10)
	for i, r := range []ledger.Rejection{
		{Reason: "malformed_json", Detail: "unexpected end", Subject: "atmost.intent.a", Stream: "ATMOST_INTENTS", StreamSeq: 1, Raw: []byte("{")},
		{Reason: "unknown_account", Detail: "acct-x", Subject: "atmost.intent.b", Stream: "ATMOST_INTENTS", StreamSeq: 2, Raw: big,
			Headers: map[string][]string{"Nats-Msg-Id": {"m2"}}},
		{Reason: "malformed_json", Detail: "not JSON", Subject: "atmost.intent.c", Stream: "ATMOST_INTENTS", StreamSeq: 3, Raw: []byte("nope")},
	} {
		_, err := e.l.Reject(e.ctx, []ledger.Rejection{r})
		require.NoError(t, err, "reject %d", i)
		// received_at is the database clock; keep the order unambiguous.
		e.exec(`UPDATE rejects SET received_at = now() - $1::BIGINT * INTERVAL '1 second' WHERE stream_seq = $2`, 10-i, r.StreamSeq)
	}

	all, err := e.l.Rejects(e.ctx, "", 10)
	require.NoError(t, err)
	require.Len(t, all, 3)
	require.Equal(t, []int64{3, 2, 1}, []int64{all[0].StreamSeq, all[1].StreamSeq, all[2].StreamSeq}, "newest first")
	require.Equal(t, "nope", string(all[0].Preview))
	require.Len(t, all[1].Preview, ledger.RejectPreviewBytes, "a preview, not the whole message")
	require.Equal(t, len(big), all[1].Size)
	require.Equal(t, []string{"m2"}, all[1].Headers["Nats-Msg-Id"])

	some, err := e.l.Rejects(e.ctx, "malformed_json", 1)
	require.NoError(t, err)
	require.Len(t, some, 1)
	require.Equal(t, int64(3), some[0].StreamSeq)
	require.Equal(t, "not JSON", some[0].Detail)
}

func TestInspectIncludesTheReconciliation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.indeterminate("unknown")
	rec, err := e.l.ClaimReconciliation(e.ctx, c.Key)
	require.NoError(t, err)
	_, err = e.l.ResolveReconciliation(e.ctx, rec, ledger.NotFound, "", map[string]any{"looked": "by text"})
	require.NoError(t, err)

	r, err := e.l.Inspect(e.ctx, c.Key)
	require.NoError(t, err)
	require.Equal(t, ledger.Parked, r.Intent.State)
	require.Len(t, r.Reconciliations, 2)
	require.Equal(t, "claimed", r.Reconciliations[0].Step)
	require.Empty(t, r.Reconciliations[0].Result)
	require.Equal(t, "resolved", r.Reconciliations[1].Step)
	require.Equal(t, "not_found", r.Reconciliations[1].Result)
	require.Equal(t, c.Token, r.Reconciliations[1].Token)
	require.JSONEq(t, `{"looked": "by text"}`, string(r.Reconciliations[1].Detail))
}

func TestRetryAsRecordsTheOperatorAndTheNote(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.authorized("again")
	_, err := e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonPlatformRejected})
	require.NoError(t, err)

	require.ErrorContains(t, e.l.RetryAs(e.ctx, c.Key, " ", "why"), "operator must be named")
	require.Equal(t, ledger.Failed, e.state(c.Key))
	require.NoError(t, e.l.RetryAs(e.ctx, c.Key, "alice", "platform fixed"))
	r, err := e.l.Inspect(e.ctx, c.Key)
	require.NoError(t, err)
	last := r.Transitions[len(r.Transitions)-1]
	require.Equal(t, ledger.Failed, last.From)
	require.Equal(t, ledger.Pending, last.To)
	require.Equal(t, "alice", last.Actor, "the operator, not the ledger's configured actor")
	require.JSONEq(t, `{"note": "platform fixed"}`, string(last.Detail))
	require.Equal(t, 1, e.attempts(c.Key), "RetryAs writes no attempt row either")

	requireRefused(t, e.l.RetryAs(e.ctx, c.Key, "alice", "again"), ledger.ErrInvalidTransition)
}

// Parked intents are listed through their own index, with the same keyset pages and account
// filter as any other state, and a resolved intent leaves the list.
func TestListIntentsPagesThroughTheParked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-2', 'sim')`)
	var parked []identity.DeliveryKey
	for i := range 5 {
		key := e.submit(fmt.Sprintf("parked %d", i))
		require.NoError(t, e.l.Park(e.ctx, key, "operator", "stop"))
		parked = append(parked, key)
	}
	e.submit("still pending")
	res, err := e.l.Submit(e.ctx, []identity.Envelope{envelope(t, "acct-2", "parked elsewhere")})
	require.NoError(t, err)
	elsewhere := res[0].Key
	require.NoError(t, e.l.Park(e.ctx, elsewhere, "operator", "stop"))

	var seen []identity.DeliveryKey
	var after identity.DeliveryKey
	for {
		page, err := e.l.ListIntents(e.ctx, ledger.IntentFilter{State: ledger.Parked, Account: account, After: after}, 2)
		require.NoError(t, err)
		for _, in := range page {
			require.Equal(t, ledger.Parked, in.State)
			require.Equal(t, ledger.ReasonOperatorParked, in.Reason)
			seen = append(seen, in.Key)
		}
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].Key
	}
	require.ElementsMatch(t, parked, seen, "every parked intent of the account once")
	for i := 1; i < len(seen); i++ {
		require.Negative(t, bytes.Compare(seen[i-1].Bytes(), seen[i].Bytes()), "delivery-key order")
	}

	page, err := e.l.ListIntents(e.ctx, ledger.IntentFilter{State: ledger.Parked}, 10)
	require.NoError(t, err)
	require.Len(t, page, 6, "any account")

	require.NoError(t, e.l.Resolve(e.ctx, elsewhere, ledger.Failed, "", "operator", "looked: never posted"))
	page, err = e.l.ListIntents(e.ctx, ledger.IntentFilter{State: ledger.Parked, Account: "acct-2"}, 10)
	require.NoError(t, err)
	require.Empty(t, page, "a resolved intent is no longer parked")
}

// PostgreSQL takes neither NUL nor invalid UTF-8 in text or JSONB: a refused message's subject,
// detail, header keys and values are stored as StoredText and read back as the bytes that came,
// and a whole batch of them is one insert that the database accepts.
func TestRejectsStoreAnyBytesFaithfully(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hostile := []string{"nul\x00inside", "\xff\xfe not UTF-8", "base64:AAAA", "", "plain"}
	headers := map[string][]string{}
	for i, s := range hostile {
		headers[fmt.Sprintf("K%d", i)] = []string{s, s + s}
		headers[s+"-as-key"] = []string{"v"}
	}
	var rs []ledger.Rejection
	for i, s := range hostile {
		rs = append(rs, ledger.Rejection{Reason: "malformed_json", Detail: "detail " + s, Subject: "atmost.intent." + s,
			Stream: "ATMOST_INTENTS", StreamSeq: int64(i + 1), Headers: headers, Raw: []byte(s)})
	}
	n, err := e.l.Reject(e.ctx, rs)
	require.NoError(t, err)
	require.Equal(t, int64(len(rs)), n)

	got, err := e.l.Rejects(e.ctx, "", 10)
	require.NoError(t, err)
	require.Len(t, got, len(rs))
	for _, g := range got {
		want := rs[g.StreamSeq-1]
		require.Equal(t, want.Subject, g.Subject)
		require.Equal(t, want.Detail, g.Detail)
		require.Equal(t, want.Headers, g.Headers)
		require.Equal(t, want.Raw, g.Preview)
		sum := sha256.Sum256(want.Raw)
		require.Equal(t, sum[:], g.SHA256)
	}
	// The documented form: plain where PostgreSQL can hold it, base64 with its marker otherwise.
	require.Equal(t, 1, e.count(`SELECT count(*) FROM rejects WHERE stream_seq = 1 AND subject LIKE 'base64:%' AND decode(substr(subject, 8), 'base64') = $1`,
		[]byte("atmost.intent.nul\x00inside")))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM rejects WHERE stream_seq = 5 AND subject = 'atmost.intent.plain' AND headers->'K4'->>0 = 'plain'`))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM rejects WHERE stream_seq = 3 AND headers->'K2'->>0 = 'base64:'||encode('base64:AAAA', 'base64')`))
}

// A message the database would not take is recorded by what is known of it: its size and the
// SHA-256 of its body, none of its bytes.
func TestADigestOnlyRejectionKeepsNoBytes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := []byte("the body\x00")
	_, err := e.l.Reject(e.ctx, []ledger.Rejection{{Reason: "unstorable", Detail: "refused", Stream: "ATMOST_INTENTS", StreamSeq: 9, Raw: body, DigestOnly: true}})
	require.NoError(t, err)
	got, err := e.l.Rejects(e.ctx, "unstorable", 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Empty(t, got[0].Preview)
	require.Equal(t, len(body), got[0].Size)
	require.True(t, got[0].Truncated)
	sum := sha256.Sum256(body)
	require.Equal(t, sum[:], got[0].SHA256)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM rejects WHERE octet_length(raw) = 0`))
}

func TestStoredTextRoundTripsAnyBytes(t *testing.T) {
	t.Parallel()
	check := func(s string) bool {
		stored := ledger.StoredText(s)
		return utf8.ValidString(stored) && !strings.ContainsRune(stored, 0) && ledger.ParseStoredText(stored) == s
	}
	for _, s := range []string{"", "plain", "\x00", "\xff", "base64:", "base64:AAAA", "base64:not base64", "ünïcödé", "\u2028"} {
		require.True(t, check(s), "%q", s)
	}
	require.NoError(t, quick.Check(func(b []byte) bool { return check(string(b)) }, &quick.Config{MaxCount: 10000}))
	require.Equal(t, "plain", ledger.StoredText("plain"), "text PostgreSQL can hold is stored as it is")
}
