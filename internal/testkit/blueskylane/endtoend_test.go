package blueskylane_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform/bluesky"
)

// laneIntents and laneDropRate are the end-to-end run's size and the share of createRecords
// whose answer the proxy loses after the PDS received the whole request.
const (
	laneIntents  = 500
	laneDropRate = 0.05
)

// sweepInterval is the lane's sweeper's pass. With 5 % of the answers lost, more than the
// policy's trip_unknowns intents can be indeterminate at once, which holds the account; as in a
// deployment, the sweeper heals it once the lookups have caught up.
const sweepInterval = 200 * time.Millisecond

// 500 posts go through ingest's ledger, the relay, the dispatcher, the reconciler and the sweeper to a real
// PDS, through a proxy that loses the answer of 5 % of the createRecords after the request
// reached the PDS (seeded). The repository itself, listed on the PDS, holds exactly one post
// per intent (0 duplicates, counted from the PDS's records by text and by record key); every
// intent whose answer was lost went indeterminate and its one lookup found the post (or it was
// parked); none was sent twice.
func TestFiveHundredIntentsWithLostAnswersMakeNoDuplicateOnAPDS(t *testing.T) {
	t.Parallel()
	e := newLane(t)
	e.proxy.DropRate(laneDropRate, 46)
	e.dispatcher()
	e.reconciler()
	e.Sweeper(sweepInterval)

	start := time.Now()
	texts := worldtest.Texts("atmost's Bluesky lane, post", laneIntents)
	keys := e.Submit(account, texts...)
	intents := e.Settle(keys, 10*time.Minute, func(s ledger.State) bool { return s != ledger.Published && s != ledger.Parked })
	t.Logf("%d intents settled in %s; the proxy lost %d answers of %d createRecords", len(keys), time.Since(start).Round(time.Millisecond), e.proxy.Dropped(), e.proxy.Forwarded())
	e.T.Logf("the account was held %d times for unknown outcomes and healed by the sweeper", e.Count(`SELECT count(*) FROM control_history WHERE kind = 'health' AND reason = 'unknown_outcomes'`))

	// The PDS's own record: every post of the repository, by record key and by text.
	records := e.allRecords(posts)
	byRkey, byText := map[string]int{}, map[string]int{}
	for _, r := range records {
		prefix := "at://" + e.pds.DID + "/" + posts + "/"
		require.True(t, strings.HasPrefix(r.URI, prefix), r.URI)
		byRkey[strings.TrimPrefix(r.URI, prefix)]++
		text, _ := r.Value["text"].(string)
		byText[text]++
	}
	duplicates := 0
	for _, n := range byText {
		duplicates += n - 1
	}
	reasons := map[ledger.Reason]int{}
	for i, k := range keys {
		in := intents[k]
		reasons[in.Reason]++
		require.Equal(t, 1, byText[texts[i]], "intent %s: one post with its text on the PDS", k)
		require.Equal(t, 1, byRkey[bluesky.RecordKey(k)], "intent %s: one post under its record key", k)
		if in.State == ledger.Published {
			require.Equal(t, "at://"+e.pds.DID+"/"+posts+"/"+bluesky.RecordKey(k), in.ObjectID, "intent %s: the ledger names the PDS's record", k)
		}
	}
	t.Logf("the PDS holds %d posts for %d intents: %d duplicates; reasons: %v", len(records), len(keys), duplicates, reasons)
	require.Zero(t, duplicates)
	require.Len(t, records, len(keys))
	require.EqualValues(t, len(keys), e.proxy.Forwarded(), "one createRecord per intent reached the PDS: no resend")
	require.Positive(t, e.proxy.Dropped(), "the proxy lost some answers (seeded 5 %)")

	// Every lost answer made the intent indeterminate; its one lookup found the post, or the
	// intent was parked for a person.
	unknown := e.Count(`SELECT count(DISTINCT delivery_key) FROM history WHERE to_state = 'indeterminate'`)
	t.Logf("%d intents went indeterminate: %d send_unknown, %d readback_mismatch", unknown,
		e.Count(`SELECT count(*) FROM history WHERE to_state = 'indeterminate' AND reason = 'send_unknown'`),
		e.Count(`SELECT count(*) FROM history WHERE to_state = 'indeterminate' AND reason = 'readback_mismatch'`))
	require.GreaterOrEqual(t, unknown, int(e.proxy.Dropped()), "every lost answer is an unknown outcome")
	require.Equal(t, unknown, reasons[ledger.ReasonReconciledFound]+reasons[ledger.ReasonReconcileNotFound],
		"every unknown was found by its lookup or parked")
	require.Equal(t, len(keys)-unknown, reasons[ledger.ReasonPublished], "every other intent was published and read back")
	// An attempt a hold stopped before its authorization (evidence "held") sent nothing.
	require.Equal(t, len(keys), e.Count(`SELECT count(*) FROM history WHERE to_state = 'authorized'`), "one authorized attempt per intent")
	require.Equal(t, len(keys), e.Count(`SELECT count(*) FROM attempts a WHERE NOT EXISTS (SELECT 1 FROM attempt_evidence e WHERE e.attempt_token = a.attempt_token AND e.reason = 'held')`), "one attempt per intent, apart from those a hold stopped")
	require.Equal(t, unknown, e.Count(`SELECT count(*) FROM reconciliations WHERE step = 'resolved'`), "one lookup per unknown")
}

// allRecords is every record of a collection in the lane account's repository, read from the
// PDS page by page (com.atproto.repo.listRecords, 100 a page).
func (e *lane) allRecords(collection string) []record {
	e.T.Helper()
	var all []record
	cursor := ""
	for {
		params := url.Values{"repo": {e.pds.DID}, "collection": {collection}, "limit": {"100"}}
		if cursor != "" {
			params.Set("cursor", cursor)
		}
		var page struct {
			Records []record `json:"records"`
			Cursor  string   `json:"cursor"`
		}
		require.Equal(e.T, http.StatusOK, e.xrpc("com.atproto.repo.listRecords", params, &page))
		all = append(all, page.Records...)
		if page.Cursor == "" || len(page.Records) == 0 {
			return all
		}
		cursor = page.Cursor
	}
}
