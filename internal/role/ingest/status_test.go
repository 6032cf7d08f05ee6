package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/outcome"
	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/internal/testkit/roletest"
	"github.com/atmost/atmost/pkg/client"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/ledger"
)

// The ingest role serves the outcome service unless told not to: a producer that published
// through it learns the outcome with no database access, and `nats micro ls` finds the service
// (its PING answers under its name).
func TestIngestRoleServesTheOutcomeService(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	_, err := db.Pool.Exec(context.Background(), `INSERT INTO accounts (account_id, platform) VALUES ('acct-1', 'sim')`)
	require.NoError(t, err)
	srv := natstest.New(t)
	r := roletest.Start(t, ingest.Main, map[string]string{"ATMOST_DATABASE_URL": db.AppURL(), "ATMOST_NATS_URL": srv.URL}, "--relay-interval", "100ms")
	r.WaitReady(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	nc := srv.Connect(t)
	ping, err := nc.RequestWithContext(ctx, "$SRV.PING."+client.StatusService, nil)
	require.NoError(t, err)
	var p micro.Ping
	require.NoError(t, json.Unmarshal(ping.Data, &p))
	require.Equal(t, client.StatusService, p.Name)
	require.Equal(t, client.StatusVersion, p.Version)

	c, err := client.New(nc, client.Config{})
	require.NoError(t, err)
	receipt, err := c.Publish(ctx, client.Intent{Account: "acct-1", Action: "post", Request: map[string]any{"text": "ask the role"}})
	require.NoError(t, err)
	o, err := c.Await(ctx, receipt.Account, receipt.Key, client.Until(func(o client.Outcome) bool { return o.State != "" }))
	require.NoError(t, err)
	require.Equal(t, "pending", o.State)
	r.WaitMetrics(t, `atmost_status_requests_total{answer="found"}`)
	r.Stop(t)
	require.Contains(t, r.Stderr(), `"status":true`)

	off := roletest.Start(t, ingest.Main, map[string]string{"ATMOST_DATABASE_URL": db.AppURL(), "ATMOST_NATS_URL": srv.URL, "ATMOST_INGEST_STATUS": "false"})
	off.WaitReady(t)
	_, err = c.Status(ctx, receipt.Account, receipt.Key)
	require.ErrorIs(t, err, client.ErrNoStatusService)
	off.Stop(t)
}

// On a nats-server configured as docs/producers.md shows, a producer kept to its account uses
// the client as it is: it publishes, learns the outcome (Await, on its own account's status
// subject and events) and follows its events under its durable name; asking about the other
// account is refused by the server.
func TestAProducerKeptToItsAccountUsesTheClient(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	passwords := map[string]string{"ATMOST_NATS_PASSWORD": "pw-atmost", "PRODUCER_A_PASSWORD": "pw-a", "PRODUCER_B_PASSWORD": "pw-b"}
	srv := natstest.NewWithConfig(t, docNATSConfig(t, passwords))
	db := dbtest.New(t)
	_, err := db.Pool.Exec(ctx, `INSERT INTO accounts (account_id, platform) VALUES ('acct-a', 'sim'), ('acct-b', 'sim')`)
	require.NoError(t, err)
	l, err := ledger.New(db.AppPool(t), ledger.Config{Actor: "ingest"})
	require.NoError(t, err)
	rjs := srv.Streams(t, nats.UserInfo("atmost", passwords["ATMOST_NATS_PASSWORD"]))
	in, err := ingest.New(ctx, rjs, l, ingest.Config{MaxWait: 200 * time.Millisecond})
	require.NoError(t, err)
	svc, err := outcome.Start(rjs.Conn(), l, outcome.Config{})
	require.NoError(t, err)
	t.Cleanup(svc.Stop)

	denied := make(chan error, 16)
	nc := srv.Connect(t, nats.UserInfo("producer-a", passwords["PRODUCER_A_PASSWORD"]), nats.CustomInboxPrefix("_INBOX_producer-a"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				denied <- err
			}
		}))
	c, err := client.New(nc, client.Config{StatusTimeout: time.Second})
	require.NoError(t, err)
	r, err := c.Publish(ctx, client.Intent{Account: "acct-a", Action: "post", Request: map[string]any{"text": "mine"}})
	require.NoError(t, err)
	s, keys, err := in.BatchWritten(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, s.Created)
	require.NoError(t, relay.New(l, rjs, relay.Config{}).PublishWritten(ctx, keys))

	o, err := c.Await(ctx, "acct-a", r.Key, client.Seq(r.Seq), client.Until(func(o client.Outcome) bool { return o.State != "" }))
	require.NoError(t, err)
	require.Equal(t, "pending", o.State)

	got := make(chan events.Event, 1)
	fctx, stop := context.WithCancel(ctx)
	go func() {
		_ = c.Follow(fctx, client.FollowConfig{Durable: "producer-a", Accounts: []string{"acct-a"}}, func(_ context.Context, e events.Event) error {
			got <- e
			stop()
			return nil
		})
	}()
	select {
	case e := <-got:
		require.Equal(t, r.Key, e.DeliveryKey)
	case err := <-denied:
		t.Fatalf("following its own account was refused: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("Follow handed nothing over")
	}

	_, err = c.Status(ctx, "acct-b", r.Key)
	require.Error(t, err)
	select {
	case err := <-denied:
		require.Contains(t, err.Error(), fmt.Sprintf("Publish to %q", client.StatusSubject("acct-b")))
	case <-time.After(5 * time.Second):
		t.Fatal("asking about the other account was not refused by the server")
	}
}
