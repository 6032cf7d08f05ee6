package ledger_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/quick"
	"time"
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
	rec, err := e.l.ClaimReconciliation(e.ctx, c.Key, newClaimToken())
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

	require.ErrorContains(t, e.l.RetryAs(e.ctx, c.Key, ledger.Actor{Name: " ", Reason: "why"}), "operator must be named")
	require.Equal(t, ledger.Failed, e.state(c.Key))
	require.NoError(t, e.l.RetryAs(e.ctx, c.Key, ledger.Actor{Name: "alice", Reason: "platform fixed"}))
	r, err := e.l.Inspect(e.ctx, c.Key)
	require.NoError(t, err)
	last := r.Transitions[len(r.Transitions)-1]
	require.Equal(t, ledger.Failed, last.From)
	require.Equal(t, ledger.Pending, last.To)
	require.Equal(t, "alice", last.Actor, "the operator, not the ledger's configured actor")
	require.JSONEq(t, `{"note": "platform fixed"}`, string(last.Detail))
	require.Equal(t, 1, e.attempts(c.Key), "RetryAs writes no attempt row either")

	requireRefused(t, e.l.RetryAs(e.ctx, c.Key, ledger.Actor{Name: "alice", Reason: "again"}), ledger.ErrInvalidTransition)
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
		require.NoError(t, e.l.Park(e.ctx, key, ledger.Actor{Name: "operator", Reason: "stop"}))
		parked = append(parked, key)
	}
	e.submit("still pending")
	res, err := e.l.Submit(e.ctx, []identity.Envelope{envelope(t, "acct-2", "parked elsewhere")})
	require.NoError(t, err)
	elsewhere := res[0].Key
	require.NoError(t, e.l.Park(e.ctx, elsewhere, ledger.Actor{Name: "operator", Reason: "stop"}))

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

	require.NoError(t, e.l.Resolve(e.ctx, elsewhere, ledger.Failed, "", ledger.Actor{Name: "operator", Reason: "looked: never posted"}))
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

// RejectAt finds the reject of one message by its stream and sequence, and nothing for another
// stream's message of the same sequence.
func TestRejectAtFindsTheRejectOfOneStreamMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := e.l.Reject(e.ctx, []ledger.Rejection{
		{Reason: "unknown_account", Detail: "acct-x", Subject: "atmost.intent.acct-x", Stream: "ATMOST_INTENTS", StreamSeq: 7, Raw: []byte("{}"),
			Headers: map[string][]string{"Atmost-Delivery-Key": {"dk1:..."}}},
		{Reason: "malformed_json", Detail: "not JSON", Subject: "atmost.intent.b", Stream: "ATMOST_INTENTS", StreamSeq: 8, Raw: []byte("nope")},
	})
	require.NoError(t, err)
	r, err := e.l.RejectAt(e.ctx, "ATMOST_INTENTS", 7)
	require.NoError(t, err)
	require.Equal(t, "unknown_account", r.Reason)
	require.Equal(t, "atmost.intent.acct-x", r.Subject)
	require.Equal(t, int64(7), r.StreamSeq)
	require.Equal(t, []string{"dk1:..."}, r.Headers["Atmost-Delivery-Key"])
	_, err = e.l.RejectAt(e.ctx, "OTHER", 7)
	require.ErrorIs(t, err, ledger.ErrNotFound)
	_, err = e.l.RejectAt(e.ctx, "ATMOST_INTENTS", 9)
	require.ErrorIs(t, err, ledger.ErrNotFound)
}

// timeOrdered is a scene of intents with chosen times, several sharing one, for the time orders
// of ListIntents: keys, and each key's created and updated time.
type timeOrdered struct {
	keys             []identity.DeliveryKey
	created, updated map[identity.DeliveryKey]time.Time
}

func newTimeOrdered(t *testing.T, e *env, n int, parked bool) timeOrdered {
	t.Helper()
	base := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	s := timeOrdered{created: map[identity.DeliveryKey]time.Time{}, updated: map[identity.DeliveryKey]time.Time{}}
	for i := range n {
		key := e.submit(fmt.Sprintf("timed %d", i))
		if parked {
			require.NoError(t, e.l.Park(e.ctx, key, ledger.Actor{Name: "operator", Reason: "scene"}))
		}
		// Three intents to a created time, two to an updated time, in an order of their own.
		created := base.Add(time.Duration(i/3) * time.Second)
		updated := base.Add(time.Hour + time.Duration((n-i)/2)*time.Microsecond)
		e.exec(`UPDATE intents SET created_at = $2, updated_at = $3 WHERE delivery_key = $1`, key.Bytes(), created, updated)
		s.keys = append(s.keys, key)
		s.created[key], s.updated[key] = created, updated
	}
	return s
}

// order is the keys in the order of at, ties by key, descending when desc.
func (s timeOrdered) order(at map[identity.DeliveryKey]time.Time, desc bool) []identity.DeliveryKey {
	keys := slices.Clone(s.keys)
	slices.SortFunc(keys, func(a, b identity.DeliveryKey) int {
		c := at[a].Compare(at[b])
		if c == 0 {
			c = bytes.Compare(a.Bytes(), b.Bytes())
		}
		if desc {
			return -c
		}
		return c
	})
	return keys
}

// pages lists every intent f matches, size at a time, each page after the last of the one before.
func pages(t *testing.T, e *env, f ledger.IntentFilter, size int, between func()) []identity.DeliveryKey {
	t.Helper()
	var seen []identity.DeliveryKey
	for range 100 {
		page, err := e.l.ListIntents(e.ctx, f, size)
		require.NoError(t, err)
		for _, in := range page {
			seen = append(seen, in.Key)
		}
		if len(page) < size {
			return seen
		}
		last := page[len(page)-1]
		f.After = last.Key
		switch f.Sort {
		case ledger.SortCreated:
			f.AfterAt = last.CreatedAt
		case ledger.SortUpdated:
			f.AfterAt = last.UpdatedAt
		}
		if between != nil {
			between()
		}
	}
	t.Fatal("more than 100 pages")
	return nil
}

// In each time order, oldest or newest first, pages of any size list every intent once, in
// (time, delivery key) order, ties included, whatever is submitted between two pages; the same
// for the parked, read through their own index.
func TestListIntentsPagesInTimeOrder(t *testing.T) {
	t.Parallel()
	for _, parked := range []bool{false, true} {
		e := newEnv(t)
		s := newTimeOrdered(t, e, 11, parked)
		state := ledger.State("")
		if parked {
			state = ledger.Parked
			e.submit("pending, not parked")
		}
		for _, sort := range []ledger.IntentSort{ledger.SortCreated, ledger.SortUpdated} {
			at := s.created
			if sort == ledger.SortUpdated {
				at = s.updated
			}
			for _, desc := range []bool{false, true} {
				want := s.order(at, desc)
				for _, size := range []int{1, 2, 3, 4, 11, 12} {
					name := fmt.Sprintf("parked %t, %s, descending %t, pages of %d", parked, sort, desc, size)
					got := pages(t, e, ledger.IntentFilter{State: state, Sort: sort, Descending: desc}, size, nil)
					// Without the intents submitted between the pages of an earlier round.
					got = slices.DeleteFunc(got, func(k identity.DeliveryKey) bool { return !slices.Contains(s.keys, k) })
					require.Equal(t, want, got, name)
				}
				// New intents between pages (now: after every chosen time) do not disturb the
				// order of those already there: each is still listed once, in order.
				n := 0
				got := pages(t, e, ledger.IntentFilter{State: state, Sort: sort, Descending: desc}, 2, func() {
					key := e.submit(fmt.Sprintf("between %s %t %t %d", sort, desc, parked, n))
					if parked {
						require.NoError(t, e.l.Park(e.ctx, key, ledger.Actor{Name: "operator", Reason: "between"}))
					}
					n++
				})
				got = slices.DeleteFunc(got, func(k identity.DeliveryKey) bool { return !slices.Contains(s.keys, k) })
				require.Equal(t, want, got, "parked %t, %s, descending %t, with intents added between pages", parked, sort, desc)
			}
		}
	}
}

// The time bounds are the sort's time (updated_at in delivery-key order), Since inclusive and
// Until exclusive; the reason filters; contradictions are refused.
func TestListIntentsFiltersByTimeAndReason(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := newTimeOrdered(t, e, 9, false)
	base := s.created[s.keys[0]]
	keysOf := func(page []ledger.Intent) []identity.DeliveryKey {
		var out []identity.DeliveryKey
		for _, in := range page {
			out = append(out, in.Key)
		}
		return out
	}
	// created: keys 0-2 at base, 3-5 at base+1s, 6-8 at base+2s.
	page, err := e.l.ListIntents(e.ctx, ledger.IntentFilter{Sort: ledger.SortCreated, Since: base.Add(time.Second), Until: base.Add(2 * time.Second)}, 50)
	require.NoError(t, err)
	require.ElementsMatch(t, s.keys[3:6], keysOf(page), "since inclusive, until exclusive")
	page, err = e.l.ListIntents(e.ctx, ledger.IntentFilter{Sort: ledger.SortCreated, Since: base.Add(time.Second), Descending: true}, 50)
	require.NoError(t, err)
	require.ElementsMatch(t, s.keys[3:], keysOf(page))
	// updated: key i at base+1h+(9-i)/2 µs.
	cut := s.updated[s.keys[4]]
	for _, sort := range []ledger.IntentSort{ledger.SortKey, ledger.SortUpdated} {
		page, err = e.l.ListIntents(e.ctx, ledger.IntentFilter{Sort: sort, Until: cut}, 50)
		require.NoError(t, err)
		var want []identity.DeliveryKey
		for _, k := range s.keys {
			if s.updated[k].Before(cut) {
				want = append(want, k)
			}
		}
		require.NotEmpty(t, want)
		require.ElementsMatch(t, want, keysOf(page), "%q: until bounds the last change", sort)
	}

	failed := e.authorized("failed")
	_, err = e.l.Complete(e.ctx, failed, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed})
	require.NoError(t, err)
	rejected := e.authorized("rejected")
	_, err = e.l.Complete(e.ctx, rejected, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonPlatformRejected})
	require.NoError(t, err)
	for _, sort := range []ledger.IntentSort{ledger.SortKey, ledger.SortCreated, ledger.SortUpdated} {
		page, err = e.l.ListIntents(e.ctx, ledger.IntentFilter{Reason: ledger.ReasonConnectionFailed, Sort: sort}, 50)
		require.NoError(t, err)
		require.Equal(t, []identity.DeliveryKey{failed.Key}, keysOf(page), "%q", sort)
	}
	page, err = e.l.ListIntents(e.ctx, ledger.IntentFilter{State: ledger.Failed, Reason: ledger.ReasonPlatformRejected}, 50)
	require.NoError(t, err)
	require.Equal(t, []identity.DeliveryKey{rejected.Key}, keysOf(page))

	for f, want := range map[*ledger.IntentFilter]string{
		{Reason: "lost"}: "not a reason",
		{State: ledger.Parked, Reason: ledger.ReasonConnectionFailed}: "a reason of failed, not of parked",
		{Sort: "colour"}:   "not an order",
		{Descending: true}: "need a time order",
		{AfterAt: base}:    "need a time order",
		{Sort: ledger.SortCreated, After: s.keys[0]}:                 "starts after a key and its time",
		{Since: base.Add(time.Second), Until: base.Add(time.Second)}: "is not before until",
	} {
		_, err := e.l.ListIntents(e.ctx, *f, 10)
		require.ErrorContains(t, err, want, "%+v", *f)
	}
}
