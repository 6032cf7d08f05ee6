package dev_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/dev"
	"github.com/atmost/atmost/internal/migrate"
	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/internal/role/reconcile"
	"github.com/atmost/atmost/internal/role/sweep"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform/sim"
)

// The demo, small: every valid intent stored once, every intent settled in a declared state,
// at most one object per delivery key on the platform, every bad message rejected with its
// reason, nothing authorized under the kill switch.
func TestTheDemoEndsAtMostOnceWithEveryIntentAccountedFor(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.Empty())
	name := fmt.Sprintf("atmost_test_demo_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		_, _ = db.Pool.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	var out bytes.Buffer
	r, err := dev.Demo(context.Background(), dev.DemoOptions{DatabaseURL: withDatabase(t, db.URL, name), Intents: 400, Seed: 3, Timeout: 2 * time.Minute, Out: &out,
		Console: "127.0.0.1:0"})
	require.NoError(t, err, out.String())
	require.True(t, r.Settled, out.String())
	require.True(t, r.OK(), out.String())
	require.Equal(t, r.Valid, r.Stored)
	require.LessOrEqual(t, r.Platform.MaxCreatedPerKey, 1)
	require.Empty(t, r.Platform.KeysOverOne)
	require.Zero(t, r.SwitchAuthorizations)
	require.Equal(t, r.Redelivered, r.Dropped, "JetStream dropped every redelivery by its message id")
	rejects := 0
	for _, n := range r.Rejects {
		rejects += n
	}
	require.Equal(t, r.Bad, rejects, "every bad message is a reject with its reason")
	total := 0
	for st, reasons := range r.States {
		require.True(t, st.Valid(), "state %q", st)
		require.NotContains(t, []ledger.State{ledger.Pending, ledger.Authorized, ledger.Indeterminate}, st, "settled")
		for reason, n := range reasons {
			rule, ok := reason.Rule()
			require.True(t, ok, "reason %q", reason)
			require.Equal(t, st, rule.State)
			total += n
		}
	}
	require.Equal(t, r.Valid+r.Occurrences, total, "the valid intents and the new occurrences, nothing else")
	require.Contains(t, out.String(), "verdict: at most once")
	require.Contains(t, out.String(), "STATE")
	require.Contains(t, out.String(), "atmost demo: the console stops with the demo; --stay keeps it", "without --stay the console's end is said")
}

// atmost dev's stack: the ledger created and migrated, an embedded NATS, every role and the
// console running;
// an intent published by a producer is sent once and published; Stop stops every role.
func TestTheDevStackRunsEveryRoleOnAnEmbeddedNATS(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.Empty())
	ctx := context.Background()
	simSrv, err := platformsim.New(platformsim.Config{})
	require.NoError(t, err)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	simURL, _, err := simSrv.Serve(sctx, "127.0.0.1:0")
	require.NoError(t, err)

	stack, err := dev.Start(ctx, dev.Options{DatabaseURL: db.URL, HTTPAddrs: map[string]string{"ingest": "127.0.0.1:0", "dispatcher": "127.0.0.1:0",
		"sweeper": "127.0.0.1:0", "reconciler": "127.0.0.1:0"}, Console: "127.0.0.1:0"})
	require.NoError(t, err)
	require.NotEmpty(t, stack.Applied, "a fresh database is migrated")
	resp, err := http.Get(stack.ConsoleURL + "/login")
	require.NoError(t, err, "the console serves")
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	// The run's bootstrap token opens it, with no operator added to the ledger.
	require.NotEmpty(t, stack.ConsoleToken)
	req, err := http.NewRequest(http.MethodGet, stack.ConsoleURL+"/controls", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+stack.ConsoleToken)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the run's token logs in")
	require.True(t, strings.HasPrefix(stack.NATSURL, "nats://127.0.0.1:"))

	l, err := ledger.New(db.Pool, ledger.Config{Actor: "test"})
	require.NoError(t, err)
	require.NoError(t, l.AddAccount(ctx, ledger.Account{ID: "acct-1", Platform: sim.Name, Settings: json.RawMessage(fmt.Sprintf(`{"url":%q}`, simURL))}, ledger.Actor{Name: "test", Reason: "a test account"}))
	nc, err := nats.Connect(stack.NATSURL)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	body := `{"v":1,"account":"acct-1","action":"post","request":{"text":"through atmost dev"}}`
	env, err := identity.ParseEnvelope([]byte(body))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := js.Publish(ctx, events.IntentSubject("acct-1"), []byte(body))
		return err == nil // the streams exist once ingest started
	}, 20*time.Second, 100*time.Millisecond)
	require.Eventually(t, func() bool {
		in, err := l.Get(ctx, env.DeliveryKey())
		return err == nil && in.State == ledger.Published
	}, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, 1, simSrv.Created(env.DeliveryKey().String()))
	require.NoError(t, stack.Stop())
}

// PostgreSQL unreachable: the error names ATMOST_DATABASE_URL, and nothing is started.
func TestTheDevStackNamesTheFixWhenPostgreSQLIsUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	_, err = dev.Start(context.Background(), dev.Options{DatabaseURL: "postgres://postgres@" + addr + "/atmost?sslmode=disable&connect_timeout=2"})
	require.Error(t, err)
	require.Contains(t, err.Error(), "ATMOST_DATABASE_URL")
}

// A port a role needs that something else listens on is named, with the role, before anything
// starts: the ledger is not even migrated.
func TestTheDevStackNamesABusyPortBeforeStartingAnything(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.Empty())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	busy := ln.Addr().String()
	_, err = dev.Start(context.Background(), dev.Options{DatabaseURL: db.URL, HTTPAddrs: map[string]string{"ingest": "127.0.0.1:0", "dispatcher": "127.0.0.1:0",
		"sweeper": busy, "reconciler": "127.0.0.1:0"}})
	var b *dev.BusyError
	require.ErrorAs(t, err, &b)
	require.Equal(t, "sweeper", b.Name)
	require.Equal(t, busy, b.Addr)
	require.Contains(t, err.Error(), busy+" (the sweeper's /healthz, /readyz and /metrics) is in use, nothing was started")
	current, err := migrate.Current(context.Background(), db.URL)
	require.NoError(t, err)
	require.Zero(t, current, "nothing started: the ledger is not migrated")

	_, port, err := net.SplitHostPort(busy)
	require.NoError(t, err)
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	_, err = dev.Start(context.Background(), dev.Options{DatabaseURL: db.URL, NATSPort: n, HTTPAddrs: map[string]string{"ingest": "127.0.0.1:0", "dispatcher": "127.0.0.1:0",
		"sweeper": "127.0.0.1:0", "reconciler": "127.0.0.1:0"}})
	require.ErrorAs(t, err, &b)
	require.Equal(t, dev.EmbeddedNATS, b.Name, "the embedded NATS server's port too")

	_, err = dev.Start(context.Background(), dev.Options{DatabaseURL: db.URL, Console: busy, HTTPAddrs: map[string]string{"ingest": "127.0.0.1:0", "dispatcher": "127.0.0.1:0",
		"sweeper": "127.0.0.1:0", "reconciler": "127.0.0.1:0"}})
	require.ErrorAs(t, err, &b)
	require.Equal(t, dev.Console, b.Name, "the console's port too")
	require.Contains(t, err.Error(), busy+" (the operator console) is in use, nothing was started")
	current, err = migrate.Current(context.Background(), db.URL)
	require.NoError(t, err)
	require.Zero(t, current, "nothing started: the ledger is not migrated")
}

// HTTPAddrs(DefaultHTTPBasePort) is each role's own default address, as its --help prints it.
func TestTheDevStacksDefaultAddressesAreTheRolesOwn(t *testing.T) {
	t.Parallel()
	noEnv := func(string) (string, bool) { return "", false }
	mains := map[string]func(context.Context, []string, func(string) (string, bool), io.Writer) int{
		"ingest": ingest.Main, "dispatcher": dispatch.Main, "sweeper": sweep.Main, "reconciler": reconcile.Main,
	}
	require.Len(t, mains, len(dev.Roles))
	defaults := dev.HTTPAddrs(dev.DefaultHTTPBasePort)
	for _, role := range dev.Roles {
		var help bytes.Buffer
		require.Equal(t, 0, mains[role](context.Background(), []string{"--help"}, noEnv, &help), role)
		require.Regexp(t, `-http string\n\s+[^\n]*\(default "`+regexp.QuoteMeta(defaults[role])+`"\)`, help.String(), role)
	}
}

// A ledger without accounts gets sim-1 on the simulator it is given, once; a ledger that has an
// account of its own is someone's, and gets nothing.
func TestTheDevStackGivesOnlyAFreshLedgerItsSimAccount(t *testing.T) {
	t.Parallel()
	addrs := map[string]string{"ingest": "127.0.0.1:0", "dispatcher": "127.0.0.1:0", "sweeper": "127.0.0.1:0", "reconciler": "127.0.0.1:0"}
	start := func(dbURL, simURL string) *dev.Stack {
		s, err := dev.Start(context.Background(), dev.Options{DatabaseURL: dbURL, HTTPAddrs: addrs, SimURL: simURL})
		require.NoError(t, err)
		require.NoError(t, s.Stop())
		return s
	}
	accounts := func(db *dbtest.DB) []ledger.Account {
		l, err := ledger.New(db.Pool, ledger.Config{Actor: "test"})
		require.NoError(t, err)
		a, err := l.Accounts(context.Background())
		require.NoError(t, err)
		return a
	}

	fresh := dbtest.New(t, dbtest.Empty())
	s := start(fresh.URL, "http://127.0.0.1:9399")
	require.Equal(t, dev.SimAccount, s.SimAccount)
	require.True(t, s.SimAccountCreated)
	got := accounts(fresh)
	require.Len(t, got, 1)
	require.Equal(t, sim.Name, got[0].Platform)
	require.JSONEq(t, `{"url":"http://127.0.0.1:9399"}`, string(got[0].Settings))
	s = start(fresh.URL, "http://127.0.0.1:9399")
	require.Equal(t, dev.SimAccount, s.SimAccount, "found again")
	require.False(t, s.SimAccountCreated)

	someones := dbtest.New(t)
	l, err := ledger.New(someones.Pool, ledger.Config{Actor: "test"})
	require.NoError(t, err)
	require.NoError(t, l.AddAccount(context.Background(), ledger.Account{ID: "acct-1", Platform: sim.Name, Settings: json.RawMessage(`{"url":"http://127.0.0.1:1"}`)}, ledger.Actor{Name: "test", Reason: "theirs"}))
	s = start(someones.URL, "http://127.0.0.1:9399")
	require.Empty(t, s.SimAccount)
	require.Len(t, accounts(someones), 1, "nothing added to a ledger with accounts")
}
