package ingest_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/internal/testkit/roletest"
	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/client"
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
	require.Equal(t, atmosttype.Pending, o.State)
	r.WaitMetrics(t, `atmost_status_requests_total{answer="found"}`)
	r.Stop(t)
	require.Contains(t, r.Stderr(), `"status":true`)

	off := roletest.Start(t, ingest.Main, map[string]string{"ATMOST_DATABASE_URL": db.AppURL(), "ATMOST_NATS_URL": srv.URL, "ATMOST_INGEST_STATUS": "false"})
	off.WaitReady(t)
	_, err = c.Status(ctx, receipt.Account, receipt.Key)
	require.ErrorIs(t, err, client.ErrNoStatusService)
	off.Stop(t)
}
