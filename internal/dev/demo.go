package dev

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/atmost/atmost/internal/redact"
	"github.com/atmost/atmost/internal/streams"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform/sim"
)

// DemoOptions configure Demo.
type DemoOptions struct {
	// DatabaseURL names the demo's database, dropped and created afresh on every run: only a
	// database the demo created itself is ever dropped (freshDatabase). Default
	// DemoDatabaseURL.
	DatabaseURL string
	// Intents is how many intents the producer publishes (bad input and re-publishes
	// included). Default DefaultDemoIntents.
	Intents int
	// Seed makes the producer's choices and the platform's faults repeatable. Default
	// DefaultDemoSeed.
	Seed int64
	// Timeout bounds the wait for every intent to settle. Default DefaultDemoTimeout.
	Timeout time.Duration
	// Out receives the progress lines and the final table.
	Out io.Writer
	// Logs receives the roles' JSON log lines.
	Logs io.Writer
	// Console is the operator console's address, where a person follows the demo's parked
	// intents; "" starts none. ConsoleToken is its bootstrap token ("": one made for the run,
	// and printed).
	Console      string
	ConsoleToken string
	// Stay keeps every role and the console running after the final count, until ctx ends.
	Stay bool
}

// The demo's defaults, which atmost demo's flags show.
const (
	DefaultDemoIntents       = 3000
	DefaultDemoSeed    int64 = 1
	DefaultDemoTimeout       = 3 * time.Minute
)

// DemoDatabaseURL is the demo's database when none is named: the local server's atmost_demo,
// beside atmost dev's ledger (DefaultDatabaseURL), never it.
const DemoDatabaseURL = "postgres://postgres@127.0.0.1:5432/atmost_demo?sslmode=disable"

// demoMark is the comment the demo puts on the database it creates, and the one it looks for
// before it drops one: a database without it holds somebody's data.
const demoMark = "created by atmost demo: dropped and created again by its next run"

// demoAccounts are the demo's accounts on the simulator; the last one's platform offers an
// idempotency-status lookup, so its unknown outcomes can be proven not sent.
var demoAccounts = []string{"demo-1", "demo-2", "demo-3"}

// demoSlowCreate is how long the simulator holds a create of the delay fault before it commits
// it: a second past the demo's send timeout, so the dispatcher gives up first.
const demoSlowCreate = 3 * time.Second

// demoFaults is the simulator's plan once the demo starts: every fault of the plan, rarely.
var demoFaults = map[platformsim.Fault]float64{
	platformsim.FaultDropBeforeRead:   0.004,
	platformsim.FaultDropAfterRead:    0.004,
	platformsim.FaultDropAfterCommit:  0.004,
	platformsim.FaultErrorAfterCommit: 0.004,
	platformsim.FaultDelay:            0.002,
	platformsim.FaultRateLimited:      0.01,
	platformsim.FaultReject:           0.003,
}

// demoEnv is the roles' configuration in the demo: short leases and delays, so that retries,
// expiries and reconciliations happen while one watches.
var demoEnv = map[string]string{
	"ATMOST_LEDGER_ISOLATION":         "read-committed",
	"ATMOST_CLAIM_LEASE":              "5s",
	"ATMOST_INFLIGHT_LEASE":           "8s",
	"ATMOST_SEND_TIMEOUT":             "2s",
	"ATMOST_READBACK_TIMEOUT":         "1s",
	"ATMOST_LEASE_MARGIN":             "1s",
	"ATMOST_GATE_DELAY":               "500ms",
	"ATMOST_SWEEP_INTERVAL":           "500ms",
	"ATMOST_SWEEP_STRANDED_AFTER":     "20s",
	"ATMOST_SWEEP_LOOKUP_STALE":       "30s",
	"ATMOST_SWEEP_UNRECONCILED_AFTER": "2m",
	"ATMOST_LOOKUP_TIMEOUT":           "2s",
	"ATMOST_RECONCILE_RETRY_DELAY":    "1s",
	"ATMOST_RELAY_INTERVAL":           "200ms",
}

// DemoReport is what the demo saw, and the verdict.
type DemoReport struct {
	Produced, Republished, Redelivered, Occurrences, Bad int
	// Valid is the number of distinct valid intents the producer published; Stored how many of
	// them the ledger holds.
	Valid, Stored int
	// Dropped is how many redelivered messages JetStream dropped as duplicates.
	Dropped int
	// States counts intents by state and reason.
	States map[ledger.State]map[ledger.Reason]int
	// Rejects counts refused input by reason.
	Rejects map[string]int
	// Along counts notable transitions on the way (retries, gate refusals, expiries...), by
	// reason, from history.
	Along map[string]int
	// Platform is the simulator's own count.
	Platform platformsim.Counts
	// SwitchAuthorizations counts authorizations made while the kill switch was on (after its
	// change committed): always 0.
	SwitchAuthorizations int
	PublishTook, Took    time.Duration
	Settled              bool
}

// OK says whether the demo proved what it shows: at most one object per delivery key, every
// valid intent stored, every intent in a declared state, nothing authorized under the switch.
func (r DemoReport) OK() bool {
	undeclared := 0
	for st := range r.States {
		if !st.Valid() {
			undeclared++
		}
	}
	published := 0
	for _, n := range r.States[ledger.Published] {
		published += n
	}
	// A demo that sent nothing would pass the rest: most valid intents must be published.
	return r.Platform.MaxCreatedPerKey <= 1 && r.Stored == r.Valid && undeclared == 0 && r.SwitchAuthorizations == 0 && r.Settled &&
		published > r.Valid/2
}

// Demo runs the stack with the platform simulator and a producer, and prints progress and a
// final table to opts.Out.
func Demo(ctx context.Context, opts DemoOptions) (DemoReport, error) {
	opts.Intents = cmp.Or(opts.Intents, DefaultDemoIntents)
	opts.Seed = cmp.Or(opts.Seed, DefaultDemoSeed)
	opts.Timeout = cmp.Or(opts.Timeout, DefaultDemoTimeout)
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	opts.DatabaseURL = cmp.Or(opts.DatabaseURL, DemoDatabaseURL)
	dbURL := opts.DatabaseURL
	if err := freshDatabase(ctx, dbURL); err != nil {
		return DemoReport{}, err
	}
	simSrv, err := platformsim.New(platformsim.Config{StatusLookup: true, Plan: platformsim.Plan{Seed: opts.Seed, Rates: demoFaults, Delay: demoSlowCreate}})
	if err != nil {
		return DemoReport{}, err
	}
	sctx, stopSim := context.WithCancel(ctx)
	defer stopSim()
	simURL, _, err := simSrv.Serve(sctx, "127.0.0.1:0")
	if err != nil {
		return DemoReport{}, fmt.Errorf("platform simulator: %w", err)
	}
	fmt.Fprintf(opts.Out, "atmost demo: ledger %s, platform simulator %s\n", redact.URL(dbURL), simURL)

	stack, err := Start(ctx, Options{DatabaseURL: dbURL, Env: overlay(noEnv, demoEnv), Logs: opts.Logs, Console: opts.Console, ConsoleToken: opts.ConsoleToken,
		HTTPAddrs: map[string]string{"ingest": "127.0.0.1:0", "dispatcher": "127.0.0.1:0", "sweeper": "127.0.0.1:0", "reconciler": "127.0.0.1:0"}})
	if err != nil {
		return DemoReport{}, err
	}
	defer func() { _ = stack.Stop() }()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return DemoReport{}, err
	}
	defer pool.Close()
	l, err := ledger.New(pool, ledger.Config{Actor: "demo", Isolation: pgx.ReadCommitted})
	if err != nil {
		return DemoReport{}, err
	}
	if err := configure(ctx, l, simURL); err != nil {
		return DemoReport{}, err
	}
	if stack.ConsoleURL != "" {
		fmt.Fprintf(opts.Out, "atmost demo: the console is at %s (the parked intents: %s/intents?state=parked)\n", stack.ConsoleURL, stack.ConsoleURL)
		if stack.ConsoleToken != "" {
			fmt.Fprintf(opts.Out, "atmost demo: log in to the console with this run's token (console:bootstrap): %s\n", stack.ConsoleToken)
		}
	}
	fmt.Fprintf(opts.Out, "atmost demo: every role running (NATS %s, embedded); publishing %d intents to %d accounts\n", stack.NATSURL, opts.Intents, len(demoAccounts))

	nc, err := nats.Connect(stack.NATSURL, nats.Name("atmost demo producer"))
	if err != nil {
		return DemoReport{}, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(1024))
	if err != nil {
		return DemoReport{}, err
	}
	if err := streams.Ensure(ctx, nc, js, streams.Config{}); err != nil {
		return DemoReport{}, err
	}

	start := time.Now()
	p := &producer{js: js, rng: rand.New(rand.NewPCG(uint64(opts.Seed), 7)), ledger: l, pool: pool}
	progress := newProgress(opts.Out, pool, start)
	go progress.run(ctx)
	defer progress.stop()
	if err := p.publish(ctx, opts.Intents, progress); err != nil {
		return DemoReport{}, err
	}
	progress.produced.Store(int64(opts.Intents))
	r := DemoReport{Produced: opts.Intents, Republished: p.republished, Redelivered: p.redelivered, Occurrences: p.occurrences,
		Bad: p.bad, Valid: len(p.keys), Dropped: p.dropped, SwitchAuthorizations: p.switchAuthorizations, PublishTook: time.Since(start)}

	settledAt, settled := settle(ctx, pool, stack, len(p.keys)+p.occurrences, opts.Timeout)
	progress.stop()
	r.Settled = settled
	r.Took = settledAt.Sub(start)
	if err := stack.Err(); err != nil {
		return r, err
	}
	if err := report(ctx, pool, p, simSrv, &r); err != nil {
		return r, err
	}
	printReport(opts.Out, r)
	if !opts.Stay && stack.ConsoleURL != "" {
		// Off a terminal make demo does not stay: the console the first lines named goes away.
		fmt.Fprintln(opts.Out, "\natmost demo: the console stops with the demo; --stay keeps it and every role running after the count (make demo passes it on a terminal)")
	}
	if opts.Stay && stack.ConsoleURL != "" {
		fmt.Fprintf(opts.Out, "\natmost demo: every role and the console keep running: the parked intents are at %s/intents?state=parked; Ctrl-C stops them\n", stack.ConsoleURL)
		select {
		case <-ctx.Done():
		case <-stack.Failed():
		}
	}
	return r, nil
}

func noEnv(string) (string, bool) { return "", false }

// freshDatabase drops the database that raw names and creates it again, empty, marked with
// demoMark; a database that does not exist is created so. It refuses a database without the
// mark (one the demo did not create, whatever its name: the URL may name a ledger), and the
// server's maintenance database, on which it connects.
func freshDatabase(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("the demo's database URL: %w", err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" || name == "postgres" || strings.Contains(name, "/") {
		return fmt.Errorf("the demo's database URL %s names no database of its own: name one, e.g. .../atmost_demo", redact.URL(raw))
	}
	admin := *u
	admin.Path = "/postgres"
	conn, err := pgx.Connect(ctx, admin.String())
	if err != nil {
		return fmt.Errorf("PostgreSQL at %s is not reachable (start it, or name a server that runs in --database-url): %w", redact.URL(admin.String()), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var comment *string
	err = conn.QueryRow(ctx, "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1", name).Scan(&comment)
	ident := pgx.Identifier{name}.Sanitize()
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return fmt.Errorf("look up the demo's database %s: %w", name, err)
	case comment == nil || *comment != demoMark:
		return fmt.Errorf("database %s exists and was not created by atmost demo, which drops only its own: name another in --database-url, or drop %s yourself if it holds nothing you need", name, name)
	default:
		if _, err := conn.Exec(ctx, "DROP DATABASE "+ident+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop the demo's database %s: %w", name, err)
		}
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return fmt.Errorf("create the demo's database %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "COMMENT ON DATABASE "+ident+" IS "+quote(demoMark)); err != nil {
		return fmt.Errorf("mark the demo's database %s: %w", name, err)
	}
	return nil
}

// quote is s as a SQL string literal: COMMENT takes no parameter.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// configure adds the demo's accounts and policy: no rate limit, short backoffs, and definitive
// platform refusals retried by policy (then parked at the cap), so every path shows. The
// reconcile delay covers the platform's slowest create (demoSlowCreate, a second past the send
// timeout): a lookup made while a request is still in flight inside the platform proves
// nothing, and it is the only one.
func configure(ctx context.Context, l *ledger.Ledger, simURL string) error {
	for i, id := range demoAccounts {
		settings, err := json.Marshal(map[string]any{"url": simURL, "reconcile_delay": "2s", "status_lookup": i == len(demoAccounts)-1})
		if err != nil {
			return err
		}
		if err := l.AddAccount(ctx, ledger.Account{ID: id, Platform: sim.Name, Settings: settings}, ledger.Actor{Name: "demo", Reason: "the demo's accounts"}); err != nil {
			return fmt.Errorf("add account %s: %w", id, err)
		}
	}
	unlimited, cap3 := 0, 3
	base, maxBackoff := 500*time.Millisecond, 5*time.Second
	retryable := []ledger.Reason{ledger.ReasonConnectionFailed, ledger.ReasonPlatformRejected, ledger.ReasonKillSwitch,
		ledger.ReasonRateLimited, ledger.ReasonCredentialRotating, ledger.ReasonReconciledNotSent}
	_, err := l.SetPolicy(ctx, ledger.GlobalScope, ledger.PolicyEdit{Set: ledger.PolicyOverride{RatePerMinute: &unlimited,
		AttemptCap: &cap3, BackoffBase: &base, BackoffMax: &maxBackoff, RetryableReasons: retryable}}, ledger.Actor{Name: "demo", Reason: "the demo's policy"})
	return err
}

// producer publishes the way real producers do: mostly new intents, and also the same
// message again (a producer's retry, with a new message id), the same message with the same
// id (a redelivery JetStream drops), the same request meant as a new occurrence, and bad input.
type producer struct {
	js          jetstream.JetStream
	rng         *rand.Rand
	ledger      *ledger.Ledger
	pool        *pgxpool.Pool
	sent        []published // valid messages so far
	keys        map[identity.DeliveryKey]bool
	republished int
	redelivered int
	occurrences int
	bad         int
	dropped     int
	futures     []jetstream.PubAckFuture
	redelivery  map[jetstream.PubAckFuture]bool

	switchAuthorizations int
}

type published struct {
	account, body, msgID string
}

var badInputs = []struct{ account, body string }{
	{"demo-1", `{"v":1,"account":"demo-1","action":"post","request":{"text":"unterminated"`},
	{"demo-1", `{"v":1,"account":"demo-1","action":"post","request":{"text":"x"},"colour":"red"}`},
	{"nobody", `{"v":1,"account":"nobody","action":"post","request":{"text":"for an account nobody configured"}}`},
	{"demo-2", `{"v":1,"account":"demo-2","request":{"text":"no action"}}`},
	{"demo-2", `{"v":2,"account":"demo-2","action":"post","request":{"text":"a version this ingest does not speak"}}`},
}

func (p *producer) publish(ctx context.Context, n int, prog *progress) error {
	p.keys = map[identity.DeliveryKey]bool{}
	p.redelivery = map[jetstream.PubAckFuture]bool{}
	switchAt, switchFor := int(float64(n)*0.4), 2*time.Second
	switched := make(chan error, 1)
	for i := 0; i < n; i++ {
		if i == switchAt {
			// The switch is flipped while the producer carries on: work piles up, waiting.
			go func() { switched <- p.killSwitch(ctx, switchFor) }()
		}
		roll := p.rng.Float64()
		var err error
		switch {
		case roll < 0.05 && len(p.sent) > 0: // the producer retries: same body, new message id
			m := p.sent[p.rng.IntN(len(p.sent))]
			err = p.send(ctx, m.account, m.body, fmt.Sprintf("demo-retry-%d", i), false)
			p.republished++
		case roll < 0.08 && len(p.sent) > 0: // redelivered with its own message id: dropped
			m := p.sent[len(p.sent)-1]
			err = p.send(ctx, m.account, m.body, m.msgID, true)
			p.redelivered++
		case roll < 0.10: // bad input, never lost: stored as a reject with its reason
			b := badInputs[p.bad%len(badInputs)]
			err = p.send(ctx, b.account, b.body, fmt.Sprintf("demo-bad-%d", i), false)
			p.bad++
		case roll < 0.12 && len(p.sent) > 0: // the same request meant as a new occurrence
			m := p.sent[p.rng.IntN(len(p.sent))]
			var env map[string]any
			if err := json.Unmarshal([]byte(m.body), &env); err != nil {
				return err
			}
			env["occurrence"] = fmt.Sprintf("again-%d", i)
			body, _ := json.Marshal(env)
			err = p.send(ctx, m.account, string(body), fmt.Sprintf("demo-occurrence-%d", i), false)
			p.occurrences++
		default:
			account := demoAccounts[p.rng.IntN(len(demoAccounts))]
			body := fmt.Sprintf(`{"v":1,"account":%q,"action":"post","request":{"text":"demo post %d, seed %d"}}`, account, i, p.rng.IntN(1_000_000))
			env, perr := identity.ParseEnvelope([]byte(body))
			if perr != nil {
				return perr
			}
			p.keys[env.DeliveryKey()] = true
			m := published{account: account, body: body, msgID: fmt.Sprintf("demo-%d", i)}
			p.sent = append(p.sent, m)
			err = p.send(ctx, account, body, m.msgID, false)
		}
		if err != nil {
			return err
		}
		prog.produced.Store(int64(i + 1))
		if i%200 == 199 { // a steady producer, not one burst
			if err := p.wait(ctx); err != nil {
				return err
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if err := p.wait(ctx); err != nil {
		return err
	}
	return <-switched
}

func (p *producer) send(ctx context.Context, account, body, msgID string, redelivery bool) error {
	f, err := p.js.PublishMsgAsync(&nats.Msg{Subject: events.IntentSubject(account), Data: []byte(body),
		Header: nats.Header{jetstream.MsgIDHeader: []string{msgID}}})
	if err != nil {
		return fmt.Errorf("publish an intent: %w", err)
	}
	p.futures = append(p.futures, f)
	p.redelivery[f] = redelivery
	return nil
}

// wait collects the acknowledgements of what was published so far.
func (p *producer) wait(ctx context.Context) error {
	for _, f := range p.futures {
		select {
		case ack := <-f.Ok():
			if ack.Duplicate && p.redelivery[f] {
				p.dropped++
			}
		case err := <-f.Err():
			return fmt.Errorf("JetStream refused an intent: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
		delete(p.redelivery, f)
	}
	p.futures = p.futures[:0]
	return nil
}

// killSwitch turns the global kill switch on for d, and counts the authorizations made while
// it was on (from a second after it committed, when no Authorize that began before it can
// still be running): the ledger refuses them all.
func (p *producer) killSwitch(ctx context.Context, d time.Duration) error {
	if _, err := p.ledger.SetSwitch(ctx, ledger.GlobalScope, true, ledger.Actor{Name: "demo", Reason: "the demo flips the kill switch mid-run"}); err != nil {
		return err
	}
	time.Sleep(time.Second)
	before, err := p.authorizations(ctx)
	if err != nil {
		return err
	}
	time.Sleep(d - time.Second)
	after, err := p.authorizations(ctx)
	if err != nil {
		return err
	}
	p.switchAuthorizations = after - before
	_, err = p.ledger.SetSwitch(ctx, ledger.GlobalScope, false, ledger.Actor{Name: "demo", Reason: "the demo turns the kill switch off again"})
	return err
}

func (p *producer) authorizations(ctx context.Context) (int, error) {
	var n int
	err := p.pool.QueryRow(ctx, `SELECT count(*) FROM history WHERE reason = 'authorized'`).Scan(&n)
	return n, err
}

// settle waits until no intent is pending, authorized or indeterminate and the counts have
// not moved for three seconds (a failed intent may still be retried), or timeout. It returns
// when that final state was first seen.
func settle(ctx context.Context, pool *pgxpool.Pool, stack *Stack, expected int, timeout time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(timeout)
	var last string
	stable := 0
	since := time.Now()
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return time.Now(), false
		case <-stack.Failed():
			return time.Now(), false
		case <-time.After(500 * time.Millisecond):
		}
		var total, moving int
		var sig string
		if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state IN ('pending', 'authorized', 'indeterminate')) FROM intents`).Scan(&total, &moving); err != nil {
			continue
		}
		if err := pool.QueryRow(ctx, `SELECT coalesce(string_agg(s, ','), '') FROM (SELECT state || ':' || reason || ':' || count(*) AS s FROM intents GROUP BY state, reason ORDER BY 1) x`).Scan(&sig); err != nil {
			continue
		}
		if total >= expected && moving == 0 && sig == last {
			stable++
			if stable >= 6 {
				return since, true
			}
		} else {
			stable = 0
			since = time.Now()
		}
		last = sig
	}
	return time.Now(), false
}

func report(ctx context.Context, pool *pgxpool.Pool, p *producer, simSrv *platformsim.Server, r *DemoReport) error {
	r.States = map[ledger.State]map[ledger.Reason]int{}
	byStateReason, err := countBy(ctx, pool, `SELECT state || '/' || reason, count(*) FROM intents GROUP BY state, reason`)
	if err != nil {
		return err
	}
	for sr, n := range byStateReason {
		st, reason, _ := strings.Cut(sr, "/")
		if r.States[ledger.State(st)] == nil {
			r.States[ledger.State(st)] = map[ledger.Reason]int{}
		}
		r.States[ledger.State(st)][ledger.Reason(reason)] = n
	}
	if r.Rejects, err = countBy(ctx, pool, `SELECT reason, count(*) FROM rejects GROUP BY reason`); err != nil {
		return err
	}
	if r.Along, err = countBy(ctx, pool, `SELECT reason, count(*) FROM history WHERE reason = ANY($1) GROUP BY reason`,
		[]string{"retried", "kill_switch", "connection_failed", "platform_rejected", "send_unknown", "readback_mismatch", "lease_expired", "abandoned", "reconciled_not_sent"}); err != nil {
		return err
	}
	keys := make([][]byte, 0, len(p.keys))
	for k := range p.keys {
		keys = append(keys, k.Bytes())
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM intents WHERE delivery_key = ANY($1)`, keys).Scan(&r.Stored); err != nil {
		return err
	}
	r.Platform = simSrv.Counts()
	return nil
}

// countBy runs a query of (name, count) rows and returns the counts by name.
func countBy(ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) (map[string]int, error) {
	rows, err := pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			return nil, err
		}
		out[name] = n
	}
	return out, rows.Err()
}

func printReport(w io.Writer, r DemoReport) {
	fmt.Fprintf(w, "\natmost demo: %d messages published in %s; every intent settled after %s (%.0f intents/s end to end)\n\n",
		r.Produced, r.PublishTook.Round(100*time.Millisecond), r.Took.Round(100*time.Millisecond), float64(r.Valid+r.Occurrences)/r.Took.Seconds())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATE\tREASON\tINTENTS")
	var states []string
	for st := range r.States {
		states = append(states, string(st))
	}
	sort.Strings(states)
	total := 0
	for _, st := range states {
		var reasons []string
		for reason := range r.States[ledger.State(st)] {
			reasons = append(reasons, string(reason))
		}
		sort.Strings(reasons)
		for _, reason := range reasons {
			n := r.States[ledger.State(st)][ledger.Reason(reason)]
			total += n
			fmt.Fprintf(tw, "%s\t%s\t%d\n", st, reason, n)
		}
	}
	fmt.Fprintf(tw, "all\t\t%d\n", total)
	_ = tw.Flush()

	fmt.Fprintf(w, "\nproducer: %d valid intents, %d re-published with a new message id (the ledger stored each once), %d redelivered with their own id (JetStream dropped %d), %d meant as a new occurrence, %d bad\n",
		r.Valid, r.Republished, r.Redelivered, r.Dropped, r.Occurrences, r.Bad)
	var rejects []string
	for reason, n := range r.Rejects {
		rejects = append(rejects, fmt.Sprintf("%s %d", reason, n))
	}
	sort.Strings(rejects)
	fmt.Fprintf(w, "rejects: %s\n", orNone(strings.Join(rejects, ", ")))
	fmt.Fprintf(w, "ledger: %d of %d valid intents stored\n", r.Stored, r.Valid)
	var along []string
	for reason, n := range r.Along {
		along = append(along, fmt.Sprintf("%s %d", reason, n))
	}
	sort.Strings(along)
	fmt.Fprintf(w, "on the way (transitions by reason): %s\n", orNone(strings.Join(along, ", ")))
	fmt.Fprintf(w, "platform: %d create requests, %d objects created, at most %d per delivery key, %d lookups\n",
		r.Platform.Requests, r.Platform.Objects, r.Platform.MaxCreatedPerKey, sum(r.Platform.Lookups))
	fmt.Fprintf(w, "kill switch: on for 2 s mid-run; authorizations while it was on: %d\n", r.SwitchAuthorizations)
	switch {
	case !r.Settled:
		fmt.Fprintln(w, "\nverdict: NOT SETTLED: some intents were still moving when the demo gave up (see the table)")
	case r.OK():
		fmt.Fprintln(w, "\nverdict: at most once: no delivery key has more than one object on the platform")
	default:
		fmt.Fprintln(w, "\nverdict: FAILED: see above")
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
