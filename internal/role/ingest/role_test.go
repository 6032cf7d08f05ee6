package ingest_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/internal/testkit/roletest"
	"github.com/atmost/atmost/pkg/events"
)

// The ingest role end to end in one process: it creates the streams, takes an intent into the
// ledger, relays its creation to ATMOST_EVENTS and a work item to ATMOST_DISPATCH, serves
// /healthz, /readyz and /metrics, and stops cleanly when its context ends.
func TestIngestRoleRunsAndStopsCleanly(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	_, err := db.Pool.Exec(context.Background(), `INSERT INTO accounts (account_id, platform) VALUES ('acct-1', 'sim')`)
	require.NoError(t, err)
	srv := natstest.New(t)
	r := roletest.Start(t, ingest.Main, map[string]string{"ATMOST_DATABASE_URL": db.AppURL(), "ATMOST_NATS_URL": srv.URL}, "--relay-interval", "100ms", "--instance", "in-1")
	r.WaitReady(t)
	code, _ := r.Get("/healthz")
	require.Equal(t, http.StatusOK, code)

	nc := srv.Connect(t)
	require.NoError(t, nc.Publish(events.IntentSubject("acct-1"), []byte(post("through the role"))))
	require.Eventually(t, func() bool {
		var n int
		_ = db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox`).Scan(&n)
		var intents int
		_ = db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM intents`).Scan(&intents)
		return intents == 1 && n == 0
	}, 20*time.Second, 50*time.Millisecond, "the intent is stored and its creation relayed")
	var actor string
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT actor FROM history`).Scan(&actor))
	require.Equal(t, "ingest/in-1", actor, "the creation names the ingest process that stored it")

	// The relay counts a transition once its delete commits, which may come a moment after the
	// outbox is seen empty (the ingest role removes later: ledger.Ledger.ForgetLater).
	r.WaitMetrics(t, "atmost_relay_events_published_total 1", `atmost_transitions_total{reason="submitted",to="pending"} 1`)
	_, metrics := r.Get("/metrics")
	require.Contains(t, metrics, `atmost_ingest_messages_total{outcome="created"} 1`)
	require.Contains(t, metrics, "atmost_relay_events_published_total 1")
	require.Contains(t, metrics, "atmost_ledger_transaction_restarts_total")
	require.Contains(t, metrics, `atmost_transitions_total{reason="submitted",to="pending"} 1`)
	require.Contains(t, metrics, "atmost_ingest_consumer_pending 0")
	require.Contains(t, metrics, "atmost_relay_lag_seconds 0")
	require.Contains(t, metrics, "atmost_outbox_rows 0")
	r.Stop(t)
}

// A message the database refuses is recorded as unstorable on the role's delivery bound, and
// the role counts it.
func TestIngestRoleCountsUnstorableMessages(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	for _, sql := range []string{
		`INSERT INTO accounts (account_id, platform) VALUES ('acct-1', 'sim')`,
		`ALTER TABLE intents ADD CONSTRAINT poison CHECK (request NOT LIKE '%poison%')`,
	} {
		_, err := db.Pool.Exec(ctx, sql)
		require.NoError(t, err)
	}
	srv := natstest.New(t)
	r := roletest.Start(t, ingest.Main, map[string]string{"ATMOST_DATABASE_URL": db.AppURL(), "ATMOST_NATS_URL": srv.URL, "ATMOST_INGEST_MAX_DELIVERIES": "1"})
	r.WaitReady(t)
	nc := srv.Connect(t)
	require.NoError(t, nc.Publish(events.IntentSubject("acct-1"), []byte(post("poison"))))
	require.Eventually(t, func() bool {
		_, metrics := r.Get("/metrics")
		return strings.Contains(metrics, `atmost_ingest_messages_total{outcome="unstorable"} 1`)
	}, 20*time.Second, 50*time.Millisecond, "counted")
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM rejects WHERE reason = 'unstorable'`).Scan(&n))
	require.Equal(t, 1, n)
	r.Stop(t)
}

// Ingest waits for a consumer it cannot create yet (on a cluster the JetStream API does not
// answer while a leader is elected), as the dispatcher and the reconciler do, instead of
// stopping. Here an "ingest" consumer with another ack policy stands in the way until the test
// removes it.
func TestIngestRoleWaitsForItsConsumer(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	srv := natstest.New(t)
	ctx := context.Background()
	js := srv.Streams(t)
	_, err := js.CreateConsumer(ctx, events.IntentsStream, jetstream.ConsumerConfig{Durable: "ingest", AckPolicy: jetstream.AckNonePolicy})
	require.NoError(t, err)
	r := roletest.Start(t, ingest.Main, map[string]string{"ATMOST_DATABASE_URL": db.AppURL(), "ATMOST_NATS_URL": srv.URL})
	require.Eventually(t, func() bool { return strings.Contains(r.Stderr(), "create the ingest consumer failed; retrying") }, 20*time.Second, 20*time.Millisecond,
		"%s", r.Stderr())
	require.NoError(t, js.DeleteConsumer(ctx, events.IntentsStream, "ingest"))
	r.WaitReady(t)
	r.Stop(t)
}

func TestIngestRoleRefusesABadCommandLine(t *testing.T) {
	t.Parallel()
	none := func(string) (string, bool) { return "", false }
	for _, args := range [][]string{{"--batch", "0"}, {"--max-deliveries", "0"}, {"--isolation", "snapshot"}, {"--replicas", "2"}, {"extra"}, {"--nope"}} {
		var stderr bytes.Buffer
		require.Equal(t, 2, ingest.Main(context.Background(), args, none, &stderr), "%v", args)
	}
	var stderr bytes.Buffer
	require.Equal(t, 0, ingest.Main(context.Background(), []string{"--help"}, none, &stderr))
	for _, name := range []string{"ATMOST_DATABASE_URL", "ATMOST_NATS_URL", "ATMOST_HTTP_ADDR", "ATMOST_INGEST_BATCH", "ATMOST_INGEST_MAX_DELIVERIES", "ATMOST_RELAY_INTERVAL", "ATMOST_STREAM_REPLICAS", "ATMOST_LEDGER_ISOLATION"} {
		require.True(t, strings.Contains(stderr.String(), name), "--help documents %s", name)
	}
}
