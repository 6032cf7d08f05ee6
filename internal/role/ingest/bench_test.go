package ingest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/internal/streams"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/ledger"
)

// BenchmarkIngest ingests b.N intents from a pre-filled ATMOST_INTENTS (make bench runs
// 100,000) with one ingester, batches of 500.
func BenchmarkIngest(b *testing.B) {
	ctx := context.Background()
	db := dbtest.New(b)
	_, err := db.Pool.Exec(ctx, `INSERT INTO accounts (account_id, platform) VALUES ('acct-1', 'sim')`)
	require.NoError(b, err)
	l, err := ledger.New(db.AppPool(b), ledger.Config{Actor: "ingest"})
	require.NoError(b, err)
	nc := natstest.New(b).Connect(b)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	require.NoError(b, err)
	require.NoError(b, streams.Ensure(ctx, nc, js, streams.Config{}))
	for i := 0; i < b.N; i++ {
		_, err := js.PublishMsgAsync(&nats.Msg{Subject: events.IntentSubject("acct-1"), Data: []byte(post(fmt.Sprintf("bench %d", i)))})
		require.NoError(b, err)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(5 * time.Minute):
		b.Fatal("pre-filling the stream took too long")
	}
	in, err := ingest.New(ctx, js, l, ingest.Config{Batch: 500, MaxWait: 200 * time.Millisecond})
	require.NoError(b, err)
	var before int64
	require.NoError(b, db.Pool.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&before))

	b.ResetTimer()
	created := 0
	for created < b.N {
		s, err := in.Batch(ctx)
		require.NoError(b, err)
		created += s.Created
	}
	b.StopTimer()
	b.ReportMetric(float64(created)/b.Elapsed().Seconds(), "intents/s")
	time.Sleep(600 * time.Millisecond)
	var after int64
	require.NoError(b, db.Pool.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&after))
	b.ReportMetric(float64(after-before)/float64(created), "commits/intent")
}
