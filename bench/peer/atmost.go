package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/atmost/atmost/internal/dev"
	"github.com/atmost/atmost/internal/streams"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform/sim"
	"github.com/atmost/atmost/pkg/platform/webhook"
)

// account is the one account both sides post for.
const account = "acct-1"

// intent is one intent of the job, as both sides see it.
type intent struct {
	body []byte // the envelope atmost's producer publishes
	key  identity.DeliveryKey
	text string
}

// newIntent is intent i of a run: a post with a text of its own.
func newIntent(prefix string, i int) (intent, error) {
	text := fmt.Sprintf("%s %d", prefix, i)
	body := fmt.Appendf(nil, `{"v":1,"account":%q,"action":"post","request":{"text":%q}}`, account, text)
	env, err := identity.ParseEnvelope(body)
	if err != nil {
		return intent{}, err
	}
	return intent{body: body, key: env.DeliveryKey(), text: text}, nil
}

// platformConfig is the simulator both sides post to: no deduplication (a second create with
// a key makes a second object), and the share faults of creates committed and then dropped.
func platformConfig(latency time.Duration, faults float64, seed int64) platformsim.Config {
	cfg := platformsim.Config{Latency: latency, StatusLookup: true}
	if faults > 0 {
		cfg.Plan = platformsim.Plan{Seed: seed, Rates: map[platformsim.Fault]float64{platformsim.FaultDropAfterCommit: faults}}
	}
	return cfg
}

// atmostStack is atmost's side of a run: a fresh ledger, every role as `atmost dev` runs them,
// a producer's own NATS connection, and the platform simulator.
type atmostStack struct {
	db       *database
	sim      *platformsim.Server
	stack    *dev.Stack
	pool     *pgxpool.Pool
	producer jetstream.JetStream
	nc       *nats.Conn
	stopSim  context.CancelFunc
}

// startAtmost starts the stack and waits until every role is ready; adapter is webhook or sim.
func startAtmost(ctx context.Context, o options, cfg platformsim.Config, adapter string, logs io.Writer) (_ *atmostStack, err error) {
	s := &atmostStack{}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.sim, err = platformsim.New(cfg); err != nil {
		return nil, err
	}
	sctx, stopSim := context.WithCancel(ctx)
	s.stopSim = stopSim
	simURL, _, err := s.sim.Serve(sctx, "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("platform simulator: %w", err)
	}
	if s.db, err = createDatabase(ctx, o.adminURL, "atmost"); err != nil {
		return nil, err
	}
	addrs := map[string]string{}
	for _, r := range dev.Roles {
		if addrs[r], err = freeAddr(); err != nil {
			return nil, err
		}
	}
	// The roles' settings: the benchmark's own ATMOST_* environment (ATMOST_INGEST_LINGER=20ms,
	// say), and the ledger's isolation of -isolation.
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "ATMOST_") && k != "ATMOST_TEST_DATABASE_URL" {
			env[k] = v
		}
	}
	env["ATMOST_LEDGER_ISOLATION"] = o.isolation
	s.stack, err = dev.Start(ctx, dev.Options{DatabaseURL: s.db.url, HTTPAddrs: addrs, Logs: logs,
		Env: func(name string) (string, bool) { v, ok := env[name]; return v, ok }})
	if err != nil {
		return nil, err
	}
	if s.pool, err = pgxpool.New(ctx, s.db.url); err != nil {
		return nil, err
	}
	if err := configureAccount(ctx, s.pool, simURL, adapter); err != nil {
		return nil, err
	}
	for _, r := range dev.Roles {
		if err := awaitReady(ctx, s.stack, r, addrs[r]); err != nil {
			return nil, err
		}
	}
	// The producer has a connection of its own, as producers do: its burst of asynchronous
	// publishes must not fill the roles' publish window.
	if s.nc, err = nats.Connect(s.stack.NATSURL, nats.Name("peer producer")); err != nil {
		return nil, err
	}
	if s.producer, err = jetstream.New(s.nc, jetstream.WithPublishAsyncMaxPending(4096)); err != nil {
		return nil, err
	}
	if err := streams.Ensure(ctx, s.nc, s.producer, streams.Config{}); err != nil {
		return nil, err
	}
	return s, nil
}

// configureAccount adds the account and lifts the rate limit (the default policy's would set
// the pace). The webhook account reads each object back with a GET of its own and looks an
// unknown outcome up by key, one second after the send's deadline.
func configureAccount(ctx context.Context, pool *pgxpool.Pool, simURL, adapter string) error {
	l, err := ledger.New(pool, ledger.Config{Actor: "bench", Isolation: pgx.ReadCommitted})
	if err != nil {
		return err
	}
	a := ledger.Account{ID: account, Platform: sim.Name, Settings: json.RawMessage(fmt.Sprintf(`{"url":%q,"reconcile_delay":"1s","status_lookup":true}`, simURL))}
	if adapter == "webhook" {
		settings, err := json.Marshal(webhook.Settings{
			URL:            simURL + "/v1/accounts/" + account + "/post",
			BodyTemplate:   json.RawMessage(`{"text":"$text"}`),
			ReadbackURL:    simURL + "/v1/objects/{id}",
			StatusURL:      simURL + "/v1/idempotency/{key}",
			ReconcileDelay: "1s",
		})
		if err != nil {
			return err
		}
		a = ledger.Account{ID: account, Platform: webhook.Name, Settings: settings}
	}
	if err := l.AddAccount(ctx, a, ledger.Actor{Name: "bench", Reason: "the peer benchmark's account"}); err != nil {
		return err
	}
	unlimited := 0
	_, err = l.SetPolicy(ctx, account, ledger.PolicyEdit{Set: ledger.PolicyOverride{RatePerMinute: &unlimited}}, ledger.Actor{Name: "bench", Reason: "no rate limit in the benchmark"})
	return err
}

var readyClient = &http.Client{Timeout: 2 * time.Second}

// awaitReady waits until the role answers 200 on /readyz.
func awaitReady(ctx context.Context, stack *dev.Stack, name, addr string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := readyClient.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-stack.Failed():
			return stack.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the %s role was not ready within 60 s", name)
		}
	}
}

// publish sends the intent's envelope to ATMOST_INTENTS without waiting for the answer.
func (s *atmostStack) publish(in intent) error {
	_, err := s.producer.PublishMsgAsync(&nats.Msg{Subject: events.IntentSubject(account), Data: in.body})
	return err
}

// awaitPublished collects the acknowledgements of what was published.
func (s *atmostStack) awaitPublished(ctx context.Context) error {
	select {
	case <-s.producer.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// settle waits until n intents exist and none is on its way (pending, authorized or
// indeterminate), and returns when it saw that. The platform's count is read in this process
// for free; the ledger is asked only once every object exists, so the benchmark's polling does
// not scan intents under load.
func (s *atmostStack) settle(ctx context.Context, n int, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for s.sim.ObjectCount() < n {
		if err := s.tick(ctx, deadline); err != nil {
			return time.Time{}, fmt.Errorf("%d of %d objects on the platform: %w", s.sim.ObjectCount(), n, err)
		}
	}
	for {
		var total, moving int
		if err := s.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state IN ('pending', 'authorized', 'indeterminate')) FROM intents`).Scan(&total, &moving); err != nil {
			return time.Time{}, err
		}
		if total >= n && moving == 0 {
			return time.Now(), nil
		}
		if err := s.tick(ctx, deadline); err != nil {
			return time.Time{}, fmt.Errorf("%d intents, %d of them still on their way: %w", total, moving, err)
		}
	}
}

func (s *atmostStack) tick(ctx context.Context, deadline time.Time) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.stack.Failed():
		return s.stack.Err()
	case <-time.After(10 * time.Millisecond):
	}
	if time.Now().After(deadline) {
		return errors.New("timed out (-timeout)")
	}
	return nil
}

// states counts the intents by state.
func (s *atmostStack) states(ctx context.Context) (map[string]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT state, count(*) FROM intents GROUP BY state`)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[st] = n
	}
	return out, rows.Err()
}

// close stops every role and drops the database.
func (s *atmostStack) close() {
	if s.nc != nil {
		s.nc.Close()
	}
	if s.pool != nil {
		s.pool.Close()
	}
	if s.stack != nil {
		_ = s.stack.Stop()
	}
	if s.stopSim != nil {
		s.stopSim()
	}
	if s.db != nil {
		_ = s.db.drop()
	}
}
