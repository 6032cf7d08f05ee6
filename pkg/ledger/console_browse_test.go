package ledger_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// browseScene stores n intents and sets each one's state, reason and time of last change as
// the owner does, so that a read can be checked against a known order: intent i changed i
// minutes after base, in the state states[i%len(states)].
func browseScene(e *env, n int, base time.Time) []identity.DeliveryKey {
	e.t.Helper()
	states := []struct {
		state  ledger.State
		reason ledger.Reason
	}{
		{ledger.Published, ledger.ReasonPublished}, {ledger.Parked, ledger.ReasonReconcileNotFound},
		{ledger.Failed, ledger.ReasonConnectionFailed}, {ledger.Indeterminate, ledger.ReasonSendUnknown},
		{ledger.Pending, ledger.ReasonSubmitted}, {ledger.Parked, ledger.ReasonOperatorParked},
	}
	keys := make([]identity.DeliveryKey, n)
	for i := range keys {
		keys[i] = e.submit(fmt.Sprintf("browse text %03d", i))
		s := states[i%len(states)]
		e.exec(`UPDATE intents SET state = $2, reason = $3, updated_at = $4 WHERE delivery_key = $1`,
			keys[i].Bytes(), string(s.state), string(s.reason), base.Add(time.Duration(i)*time.Minute))
	}
	return keys
}

// browseAll pages through Browse with f, per intents a page, and returns every key in order.
func browseAll(e *env, f ledger.BrowseFilter, per int) (keys []identity.DeliveryKey, pages int) {
	e.t.Helper()
	var after ledger.BrowseCursor
	for {
		page, err := e.l.Browse(e.ctx, f, after, per)
		require.NoError(e.t, err)
		require.LessOrEqual(e.t, len(page.Intents), per)
		pages++
		for _, in := range page.Intents {
			keys = append(keys, in.Key)
		}
		if page.Next == nil {
			return keys, pages
		}
		require.Less(e.t, pages, 1000, "Browse never ends")
		after = *page.Next
	}
}

func TestBrowsePagesNewestFirstThroughEveryState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	base := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	keys := browseScene(e, 30, base)
	inFlight := e.authorized("in flight") // authorized now, so the newest of all

	got, pages := browseAll(e, ledger.BrowseFilter{}, 4)
	want := []identity.DeliveryKey{inFlight.Key}
	for i := len(keys) - 1; i >= 0; i-- {
		want = append(want, keys[i])
	}
	require.Equal(t, want, got, "every intent once, newest first, across pages")
	require.Equal(t, 8, pages)

	// One state: its intents only, through its own index, in the same order.
	parked, _ := browseAll(e, ledger.BrowseFilter{State: ledger.Parked}, 3)
	var wantParked []identity.DeliveryKey
	for i := len(keys) - 1; i >= 0; i-- {
		if i%6 == 1 || i%6 == 5 {
			wantParked = append(wantParked, keys[i])
		}
	}
	require.Equal(t, wantParked, parked)
	for _, st := range []ledger.State{ledger.Published, ledger.Failed, ledger.Indeterminate, ledger.Pending, ledger.Authorized} {
		got, _ := browseAll(e, ledger.BrowseFilter{State: st}, 50)
		wantN := 5
		if st == ledger.Authorized {
			wantN = 1
		}
		require.Len(t, got, wantN, st)
	}

	// Reason, account, a time range and text narrow it; the range is [Since, Until).
	byReason, _ := browseAll(e, ledger.BrowseFilter{State: ledger.Parked, Reason: ledger.ReasonReconcileNotFound}, 50)
	require.Equal(t, []identity.DeliveryKey{keys[25], keys[19], keys[13], keys[7], keys[1]}, byReason)
	inRange, _ := browseAll(e, ledger.BrowseFilter{Since: base.Add(10 * time.Minute), Until: base.Add(13 * time.Minute)}, 50)
	require.Equal(t, []identity.DeliveryKey{keys[12], keys[11], keys[10]}, inRange)
	byText, _ := browseAll(e, ledger.BrowseFilter{Text: "BROWSE TEXT 017"}, 50)
	require.Equal(t, []identity.DeliveryKey{keys[17]}, byText, "text matches the request, ignoring case")
	other, _ := browseAll(e, ledger.BrowseFilter{Account: "acct-other"}, 50)
	require.Empty(t, other)
	e.exec(`UPDATE intents SET object_id = 'obj-9' WHERE delivery_key = $1`, keys[9].Bytes())
	byObject, _ := browseAll(e, ledger.BrowseFilter{Text: "obj-9"}, 50)
	require.Equal(t, []identity.DeliveryKey{keys[9]}, byObject, "an object id matches exactly")

	_, err := e.l.Browse(e.ctx, ledger.BrowseFilter{State: "lost"}, ledger.BrowseCursor{}, 10)
	require.Error(t, err)
}

// A page examines at most the window, however rare the matches: a search for one intent among
// many returns pages that say they searched, each continuing after the last row it examined,
// and finds every match exactly once.
func TestBrowseExaminesAtMostTheWindowAndResumesAfterIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ledger.SetBrowseWindow(e.l, 7)
	keys := browseScene(e, 30, time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))

	var after ledger.BrowseCursor
	var found []identity.DeliveryKey
	searched := 0
	for {
		page, err := e.l.Browse(e.ctx, ledger.BrowseFilter{Text: "text 01"}, after, 5)
		require.NoError(t, err)
		found = append(found, keysOf(page.Intents)...)
		if page.Searched {
			searched++
		}
		if page.Next == nil {
			break
		}
		after = *page.Next
	}
	// Newest first: 029..020 do not match, 019..010 do; 30 rows at 7 a window is 5 windows.
	require.Equal(t, []identity.DeliveryKey{keys[19], keys[18], keys[17], keys[16], keys[15], keys[14], keys[13], keys[12], keys[11], keys[10]}, found)
	require.GreaterOrEqual(t, searched, 3, "the windows without a full page say they searched")

	// Without filters every window is a full page of its own: nothing is skipped at its edge.
	all, _ := browseAll(e, ledger.BrowseFilter{}, 7)
	require.Len(t, all, 30)
	all, _ = browseAll(e, ledger.BrowseFilter{}, 3)
	require.Len(t, all, 30)
}

func keysOf(in []ledger.Intent) []identity.DeliveryKey {
	out := make([]identity.DeliveryKey, len(in))
	for i, x := range in {
		out[i] = x.Key
	}
	return out
}

func TestWaitingAndChangedCountByStateAndReason(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := time.Now()
	browseScene(e, 12, now.Add(-3*time.Hour)) // i minutes after three hours ago: all older than an hour
	e.authorized("in flight")
	fresh := e.submit("fresh")
	e.exec(`UPDATE intents SET state = 'published', reason = 'published', updated_at = now() WHERE delivery_key = $1`, fresh.Bytes())

	waiting, err := e.l.Waiting(e.ctx)
	require.NoError(t, err)
	require.Equal(t, map[ledger.State]map[ledger.Reason]int64{
		ledger.Parked:        {ledger.ReasonReconcileNotFound: 2, ledger.ReasonOperatorParked: 2},
		ledger.Failed:        {ledger.ReasonConnectionFailed: 2},
		ledger.Indeterminate: {ledger.ReasonSendUnknown: 2},
		ledger.Pending:       {ledger.ReasonSubmitted: 2},
		ledger.Authorized:    {ledger.ReasonAuthorized: 1},
	}, waiting, "published intents are not counted")

	changed, err := e.l.Changed(e.ctx, now.Add(-time.Hour))
	require.NoError(t, err)
	require.Equal(t, map[ledger.State]map[ledger.Reason]int64{
		ledger.Published:  {ledger.ReasonPublished: 1},
		ledger.Authorized: {ledger.ReasonAuthorized: 1},
	}, changed)
}
