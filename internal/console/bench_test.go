package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/console"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/pkg/ledger"
)

// benchIntents is the size of the ledger BenchmarkConsolePages reads.
const benchIntents = 1_000_000

// BenchmarkConsolePages serves the console's pages, rendered, on a ledger of 1,000,000 intents
// as a busy deployment holds them after an incident: 95 % published, 2 % parked (by seven
// reasons), 1 % each failed, indeterminate and pending, a few authorized, over 20 accounts and
// 29 days. Every list is read through the partial index of its states
// (TestConsoleReadsGoThroughThePartialIndexOfEachState); the figure to watch is ms/page, which
// the console promises below 100 ms. `make bench` runs it.
func BenchmarkConsolePages(b *testing.B) {
	db := dbtest.New(b)
	ctx := context.Background()
	start := time.Now()
	_, err := db.Pool.Exec(ctx, `INSERT INTO accounts (account_id, platform) SELECT 'acct-' || a, 'sim' FROM generate_series(0, 19) a`)
	require.NoError(b, err)
	_, err = db.Pool.Exec(ctx, `
		INSERT INTO intents (delivery_key, account_id, action, request, state, reason, updated_at, created_at,
		                     attempts_authorized, object_id, lease_expires_at, attempt_token, epoch, generation, transition_seq)
		SELECT sha256(int8send(g)), 'acct-' || (g % 20), 'post',
		       '{"text":"post ' || g || ' about ' || (ARRAY['the launch','shipping','the weekly digest','a reply','an update'])[1 + g % 5] || '"}',
		       s.state, s.reason, t.at, t.at - INTERVAL '3 seconds', 1,
		       (CASE WHEN s.state = 'published' THEN 'obj-' || g END),
		       (CASE WHEN s.state = 'authorized' THEN now() + INTERVAL '1 minute' END),
		       (CASE WHEN s.state = 'authorized' THEN substring(sha256(int8send(-g)) FROM 1 FOR 16) END),
		       (CASE WHEN s.state = 'authorized' THEN 1 END), (CASE WHEN s.state = 'authorized' THEN g END), 4
		FROM generate_series(1, $1::INT) g
		CROSS JOIN LATERAL (SELECT now() - ($1::INT - g) * INTERVAL '2.5 seconds' AS at) t
		CROSS JOIN LATERAL (SELECT
		    (CASE WHEN g % 20000 = 7 THEN 'authorized' WHEN g % 1000 < 20 THEN 'parked' WHEN g % 1000 < 30 THEN 'failed'
		          WHEN g % 1000 < 40 THEN 'indeterminate' WHEN g % 1000 < 50 THEN 'pending' ELSE 'published' END) AS state,
		    (CASE WHEN g % 20000 = 7 THEN 'authorized'
		          WHEN g % 1000 < 20 THEN (ARRAY['reconcile_not_found','reconcile_not_found','reconcile_not_found','attempts_exhausted',
		                                         'duplicate_text','reconcile_unavailable','operator_parked'])[1 + g % 7]
		          WHEN g % 1000 < 30 THEN (ARRAY['connection_failed','platform_rejected','kill_switch'])[1 + g % 3]
		          WHEN g % 1000 < 40 THEN (ARRAY['send_unknown','lease_expired'])[1 + g % 2]
		          WHEN g % 1000 < 50 THEN 'submitted' ELSE 'published' END) AS reason) s`, benchIntents)
	require.NoError(b, err)
	_, err = db.Pool.Exec(ctx, `VACUUM ANALYZE intents`)
	require.NoError(b, err)
	b.Logf("%d intents stored and analyzed in %s", benchIntents, time.Since(start).Round(time.Second))

	l, err := ledger.New(db.AppPool(b), ledger.Config{Actor: "bench"})
	require.NoError(b, err)
	s, err := console.New(console.Config{Ledger: l, Token: testToken})
	require.NoError(b, err)
	srv := httptest.NewServer(s)
	defer srv.Close()
	// A page in the middle of the published: 15 days back.
	mid := time.Now().Add(-15 * 24 * time.Hour).UTC().Format("2006-01-02T15:04")
	var aParked string
	require.NoError(b, db.Pool.QueryRow(ctx, `SELECT 'dk1:' || encode(delivery_key, 'hex') FROM intents WHERE state = 'parked' LIMIT 1`).Scan(&aParked))

	pages := []struct{ name, path string }{
		{"overview", "/"},
		{"intents/newest", "/intents"},
		{"intents/parked", "/intents?state=parked"},
		{"intents/parked-reason-account", "/intents?state=parked&reason=reconcile_not_found&account=acct-7"},
		{"intents/parked-before", "/intents?state=parked&until=" + url.QueryEscape(mid)},
		{"intents/published", "/intents?state=published"},
		{"intents/published-15-days-back", "/intents?state=published&until=" + url.QueryEscape(mid)},
		{"intents/indeterminate", "/intents?state=indeterminate"},
		{"intents/failed-reason", "/intents?state=failed&reason=kill_switch"},
		{"intents/pending", "/intents?state=pending"},
		{"intents/account", "/intents?account=acct-3"},
		{"intents/text-rare", "/intents?q=" + url.QueryEscape("post 12345 about")},
		{"intent", "/intents/" + aParked},
		{"controls", "/controls"},
	}
	client := srv.Client()
	get := func(b *testing.B, path string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := client.Do(req)
		require.NoError(b, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(b, err)
		require.Equal(b, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
		switch {
		case strings.Contains(path, "q="):
			// The one match is far back: the page examined its window and offers the next.
			require.Contains(b, string(body), "Search further »", path)
		case strings.HasPrefix(path, "/intents?"):
			require.Contains(b, string(body), `href="/intents/dk1:`, "%s lists intents", path)
		}
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			get(b, p.path) // warm
			b.ResetTimer()
			t0 := time.Now()
			for range b.N {
				get(b, p.path)
			}
			b.ReportMetric(float64(time.Since(t0))/float64(b.N)/float64(time.Millisecond), "ms/page")
		})
	}
}
