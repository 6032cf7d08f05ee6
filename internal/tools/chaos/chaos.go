// Package chaos is atmost's crash-and-fault suite: the built binaries run as real processes
// (the roles, the platform simulator with a fault plan, NATS) on a real PostgreSQL, while a
// producer publishes intents (duplicates and bad input included) and the driver SIGKILLs
// random roles at random moments and restarts them, does harm to NATS, and pauses a dispatcher
// past its lease once. In the Single topology NATS is one server, restarted once; in the
// Cluster topology it is a three-node JetStream cluster with R3 streams whose stream leaders
// are SIGKILLed and stopped. With ConnectionFaults no role is killed: every role reaches
// PostgreSQL and NATS through fault proxies (faultproxy) that cut, reset, stall and delay its
// connections. At the end it checks what atmost promises: at most one object per
// delivery key on the platform, every accepted intent in the ledger, every intent in one of
// the six states, every history row on ATMOST_EVENTS exactly once, every indeterminate intent
// reconciled or parked.
package chaos

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/atmost/atmost/internal/tools/chaos/faultproxy"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// The defaults of a run's Options.
const (
	DefaultIntents         = 1000
	DefaultSeed      int64 = 1
	DefaultIsolation       = "serializable"
	DefaultSettle          = 3 * time.Minute
)

// Options configure a run.
type Options struct {
	// DatabaseURL is a migrated, empty ledger the run may use as it likes (the owner's URL).
	DatabaseURL string
	// AppDatabaseURL is the same ledger as the application role, what the roles connect as.
	// Default DatabaseURL.
	AppDatabaseURL string
	// Intents is how many messages the producer publishes. Default DefaultIntents.
	Intents int
	// Seed makes the producer's and the driver's choices and the platform's faults
	// repeatable. Default DefaultSeed.
	Seed int64
	// Dir holds the binaries, the logs and the NATS server's store.
	Dir string
	// Bin, when set, is a directory that already holds the binaries (ingest, dispatcher,
	// sweeper, reconciler, platformsim, nats-server); otherwise they are built into Dir/bin.
	Bin string
	// Isolation is the roles' ledger isolation. Default DefaultIsolation.
	Isolation string
	// Settle bounds the wait for every intent to come to rest at the end. Default
	// DefaultSettle.
	Settle time.Duration
	// Topology is the NATS servers and the processes of each role. Default Single.
	Topology Topology
	// ConnectionFaults puts every role behind fault proxies (internal/tools/chaos/faultproxy)
	// to PostgreSQL and to NATS, which cut, reset, stall and delay their connections until the
	// chaos phase ended and nine in ten intents came to rest (30 ms an intent at most). No role
	// is killed or paused and NATS is not restarted, so that what parks is the connections'
	// doing or the platform's. Single topology only.
	ConnectionFaults bool
	// Out receives progress lines.
	Out io.Writer
}

// Result is what the run found.
type Result struct {
	// Duplicates is the number of delivery keys with more than one object on the platform.
	Duplicates int
	// Lost is the number of accepted valid intents missing from the ledger.
	Lost int
	// Undeclared is the number of intents in no declared state, plus those still pending,
	// authorized or indeterminate at the end (not come to rest).
	Undeclared int
	// EventsMissing is the number of history rows not on ATMOST_EVENTS; EventsDuplicated the
	// number of transitions on it more than once, EventsUnknown the events with no history row.
	EventsMissing, EventsDuplicated, EventsUnknown int
	// Orphans is the number of attempts, evidence, history, reconciliation and outbox rows
	// whose intent (or history row) does not exist (ledger.Orphans).
	Orphans int64
	// States counts the intents by state at the end; Parked the parked ones by reason.
	States, Parked map[string]int
	// What was done to the processes: the roles SIGKILLed, by name; the NATS servers restarted
	// (cleanly or after a SIGKILL), SIGKILLed (LeaderKills of them the leader of a stream,
	// found through the JetStream API) and stopped with SIGSTOP; the dispatchers paused.
	Kills                                map[string]int
	NATSRestarts, NATSKills, LeaderKills int
	NATSPauses                           int
	Pauses                               int
	// Outages counts the platform's outages (every create refused with 429, nothing created,
	// for OutageFor): the accounts hold, their intents wait, and none is parked by it.
	Outages int
	// LeaderChanges counts, per stream, the changes of its cluster leader the driver saw
	// (it polls: a lower bound). Empty on one server.
	LeaderChanges map[string]int
	// Exited counts, by name, the roles that ended by themselves and were restarted (a role
	// whose NATS or database vanished for too long stops with an error).
	Exited map[string]int
	// Topology is the run's.
	Topology Topology
	// NATSFaults lists what went wrong doing harm to NATS (a leader that could not be found,
	// a server that did not come back healthy): the run did less than it means to.
	NATSFaults []string
	// Accepted is the number of distinct valid intents JetStream acknowledged; Produced the
	// messages published (bad input and duplicates included).
	Accepted, Produced int
	Objects            int
	// Unpublished names the intents that have an object on the platform but are not published
	// in the ledger, each with its state and reason: a send whose outcome stayed unknown and
	// went to a person, where the platform holds what the ledger could not prove.
	Unpublished []string
	Took        time.Duration
	// ConnectionFaults is the run's option; PostgresFaults and NATSConnFaults count what each
	// proxy injected, ProxiedConnections the connections each forwarded.
	ConnectionFaults               bool
	PostgresFaults, NATSConnFaults map[faultproxy.Fault]int
	ProxiedConnections             map[string]int
	// Settled is how long after the chaos phase (and the connection faults) ended every intent
	// came to rest, the five still seconds settle waits for included; the whole settle bound
	// when they did not.
	Settled time.Duration
	// MaxLookupsPerKey is the most lookups the platform saw for one key; LookupsOverClaims the
	// keys it saw looked up more often than the ledger holds lookup claims for (one lookup per
	// claim, and one claim per unknown attempt).
	MaxLookupsPerKey, LookupsOverClaims int
	// ParkedWithObject counts, by reason, the parked intents whose object is on the platform.
	// ParkedByConnections names those parked for a reason no platform fault gives
	// (platformParks), in a run whose only other faults are the connections': the connections'
	// faults alone parked them.
	ParkedWithObject    map[string]int
	ParkedByConnections []string
	// Errors counts the roles' ERROR log lines by message.
	Errors map[string]int
}

// OK reports whether every promise held.
func (r Result) OK() bool {
	return r.Duplicates == 0 && r.Lost == 0 && r.Undeclared == 0 && r.EventsMissing == 0 && r.EventsDuplicated == 0 && r.EventsUnknown == 0 && r.Orphans == 0 &&
		r.LookupsOverClaims == 0 && len(r.ParkedByConnections) == 0
}

// Line is the suite's one-line verdict, then the counts per state.
func (r Result) Line() string {
	var states []string
	for _, s := range []string{"pending", "authorized", "published", "failed", "indeterminate", "parked"} {
		states = append(states, fmt.Sprintf("%s: %d", s, r.States[s]))
	}
	conn := ""
	if r.ConnectionFaults {
		conn = fmt.Sprintf(", parked_by_connections: %d", len(r.ParkedByConnections))
	}
	return fmt.Sprintf("duplicates: %d, lost: %d, undeclared: %d, events_missing: %d, orphans: %d, max_lookups_per_key: %d%s\n%s",
		r.Duplicates, r.Lost, r.Undeclared, r.EventsMissing, r.Orphans, r.MaxLookupsPerKey, conn, strings.Join(states, ", "))
}

// roleEnv is the roles' configuration: short leases and delays, so that expiries, retries and
// reconciliations happen within the run.
var roleEnv = map[string]string{
	"ATMOST_CLAIM_LEASE":              "5s",
	"ATMOST_INFLIGHT_LEASE":           "6s",
	"ATMOST_SEND_TIMEOUT":             "2s",
	"ATMOST_READBACK_TIMEOUT":         "1s",
	"ATMOST_LEASE_MARGIN":             "1s",
	"ATMOST_GATE_DELAY":               "500ms",
	"ATMOST_RELAY_INTERVAL":           "200ms",
	"ATMOST_SWEEP_INTERVAL":           "500ms",
	"ATMOST_SWEEP_STRANDED_AFTER":     "15s",
	"ATMOST_SWEEP_LOOKUP_STALE":       "20s",
	"ATMOST_SWEEP_UNRECONCILED_AFTER": "90s",
	"ATMOST_LOOKUP_TIMEOUT":           "2s",
	"ATMOST_RECONCILE_RETRY_DELAY":    "1s",
}

var accounts = []string{"chaos-1", "chaos-2", "chaos-3", "chaos-4"}

type run struct {
	opts      Options
	rng       *rand.Rand
	pool      *pgxpool.Pool
	nats      []*natsServer
	sim       *proc
	simURL    string
	plan      []byte // the platform's fault plan, put back after the outage
	roleNames []string
	roles     map[string]*proc
	out       io.Writer
	// began is when the chaos phase began, for the progress lines.
	began time.Time
	// leaders counts the changes of the streams' leaders (a cluster's).
	leaders *leaders
	// pgProxy and natsProxy stand between the roles and PostgreSQL and NATS
	// (Options.ConnectionFaults).
	pgProxy, natsProxy *faultproxy.Proxy
}

// elapsed is the time into the chaos phase, for a progress line.
func (r *run) elapsed() string { return time.Since(r.began).Round(time.Second).String() }

// Run runs the suite and returns what it found; an error means the run itself could not be
// carried out (a build, a start), not that a promise failed: see Result.OK.
func Run(ctx context.Context, opts Options) (Result, error) {
	opts.Intents = cmp.Or(opts.Intents, DefaultIntents)
	opts.Seed = cmp.Or(opts.Seed, DefaultSeed)
	opts.Isolation = cmp.Or(opts.Isolation, DefaultIsolation)
	opts.Settle = cmp.Or(opts.Settle, DefaultSettle)
	opts.AppDatabaseURL = cmp.Or(opts.AppDatabaseURL, opts.DatabaseURL)
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Topology == (Topology{}) {
		opts.Topology = Single
	}
	if opts.ConnectionFaults && opts.Topology.clustered() {
		return Result{}, errors.New("chaos: connection faults run on one NATS server (a cluster's servers tell clients each other's addresses, past the proxy)")
	}
	start := time.Now()
	r := &run{opts: opts, rng: rand.New(rand.NewPCG(uint64(opts.Seed), 11)), roleNames: opts.Topology.roles(), roles: map[string]*proc{}, out: opts.Out}
	bin := opts.Bin
	if bin == "" {
		bin = filepath.Join(opts.Dir, "bin")
		fmt.Fprintf(r.out, "chaos: building the binaries into %s\n", bin)
		if err := Build(ctx, bin); err != nil {
			return Result{}, err
		}
	}
	pool, err := pgxpool.New(ctx, opts.DatabaseURL)
	if err != nil {
		return Result{}, err
	}
	defer pool.Close()
	r.pool = pool
	if err := r.startAll(ctx, bin); err != nil {
		r.stopAll()
		return Result{}, err
	}
	defer r.stopAll()
	if err := r.configure(ctx); err != nil {
		return Result{}, err
	}

	p := &producer{rng: rand.New(rand.NewPCG(uint64(opts.Seed), 13)), url: r.natsURLs(), keys: map[identity.DeliveryKey]bool{}}
	duration := max(20*time.Second, time.Duration(opts.Intents)*time.Second/400)
	if opts.Topology.clustered() {
		// Room for every NATS fault and the cluster's recovery from each.
		duration = max(45*time.Second, time.Duration(opts.Intents)*time.Second/150)
	}
	harm := "roles are killed and restarted"
	if opts.ConnectionFaults {
		harm = "their connections are cut, reset, stalled and delayed"
	}
	fmt.Fprintf(r.out, "chaos: publishing %d messages over %s while %s\n", opts.Intents, duration, harm)
	produced := make(chan error, 1)
	pctx, stopProducer := context.WithCancel(ctx)
	defer stopProducer()
	go func() { produced <- p.run(pctx, opts.Intents, duration) }()
	res := Result{Topology: opts.Topology, Kills: map[string]int{}, Exited: map[string]int{}, ConnectionFaults: opts.ConnectionFaults}
	r.chaos(ctx, duration+5*time.Second, &res)
	if err := <-produced; err != nil {
		return res, fmt.Errorf("producer: %w", err)
	}
	res.Produced, res.Accepted = p.produced, len(p.keys)

	if opts.ConnectionFaults {
		r.whileWorking(ctx, res.Accepted)
		r.stopConnectionFaults(&res)
	}
	fmt.Fprintf(r.out, "chaos: chaos over; every role running; waiting for every intent to come to rest\n")
	r.restartExited(&res)
	stopped := time.Now()
	settled := r.settle(ctx, opts.Settle, &res)
	res.Settled = time.Since(stopped)
	if !settled {
		fmt.Fprintf(r.out, "chaos: not every intent came to rest within %s\n", opts.Settle)
	}
	if err := r.check(ctx, p, &res); err != nil {
		return res, err
	}
	r.countErrors(&res)
	res.Took = time.Since(start)
	return res, nil
}

func (r *run) startAll(ctx context.Context, bin string) error {
	logs := filepath.Join(r.opts.Dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}
	if err := r.startNATS(ctx, bin, logs); err != nil {
		return err
	}

	simPort, err := freePort()
	if err != nil {
		return err
	}
	plan, err := json.Marshal(platformsim.Plan{Seed: r.opts.Seed, Delay: 3 * time.Second, Rates: map[platformsim.Fault]float64{
		platformsim.FaultDropBeforeRead: 0.01, platformsim.FaultDropAfterRead: 0.01, platformsim.FaultDropAfterCommit: 0.01,
		platformsim.FaultErrorAfterCommit: 0.01, platformsim.FaultDelay: 0.005, platformsim.FaultRateLimited: 0.01, platformsim.FaultReject: 0.005}})
	if err != nil {
		return err
	}
	r.plan = plan
	r.simURL = fmt.Sprintf("http://127.0.0.1:%d", simPort)
	r.sim = &proc{name: "platformsim", bin: filepath.Join(bin, "platformsim"), log: filepath.Join(logs, "platformsim.log"),
		env: []string{fmt.Sprintf("ATMOST_SIM_ADDR=127.0.0.1:%d", simPort), "ATMOST_SIM_STATUS_LOOKUP=true", "ATMOST_SIM_PLAN=" + string(plan)}}
	if err := r.sim.start(); err != nil {
		return err
	}
	if err := waitFor(ctx, 20*time.Second, func() error { _, err := r.counts(); return err }); err != nil {
		return fmt.Errorf("the platform simulator did not come up: %w (log %s)", err, r.sim.log)
	}

	dbURL, natsURL := r.opts.AppDatabaseURL, r.natsURLs()
	if r.opts.ConnectionFaults {
		if dbURL, natsURL, err = r.startProxies(); err != nil {
			return err
		}
	}
	for _, name := range r.roleNames {
		port, err := freePort()
		if err != nil {
			return err
		}
		binary := strings.TrimRight(strings.TrimRight(name, "0123456789"), "-")
		env := []string{"ATMOST_DATABASE_URL=" + dbURL, "ATMOST_NATS_URL=" + natsURL,
			fmt.Sprintf("ATMOST_STREAM_REPLICAS=%d", r.opts.Topology.NATSServers),
			fmt.Sprintf("ATMOST_HTTP_ADDR=127.0.0.1:%d", port), "ATMOST_LEDGER_ISOLATION=" + r.opts.Isolation}
		for k, v := range roleEnv {
			env = append(env, k+"="+v)
		}
		if r.opts.ConnectionFaults {
			// A stall holds a connection up to 40 s (faultproxy's StallMax): a lookup whose
			// resolve stalls that long is slow, not lost, and must not be parked as lost.
			// Environment entries that come later win.
			env = append(env, "ATMOST_SWEEP_LOOKUP_STALE=60s")
		}
		p := &proc{name: name, bin: filepath.Join(bin, binary), env: env, log: filepath.Join(logs, name+".log")}
		r.roles[name] = p
		if err := p.start(); err != nil {
			return err
		}
		// Ingest creates the streams the producer needs; the others follow.
		if err := waitFor(ctx, time.Minute, func() error { return ready(port) }); err != nil {
			return fmt.Errorf("%s is not ready: %w (log %s)", name, err, p.log)
		}
	}
	return nil
}

func ready(port int) error {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s", resp.Status)
	}
	return nil
}

func waitFor(ctx context.Context, within time.Duration, f func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// configure adds the accounts (half of them on a platform with an idempotency-status lookup)
// and the policy: no rate limit, short backoffs, refusals retried up to the cap.
func (r *run) configure(ctx context.Context) error {
	l, err := ledger.New(r.pool, ledger.Config{Actor: "chaos"})
	if err != nil {
		return err
	}
	for i, id := range accounts {
		// The delay covers the slowest create: the delay fault commits 3 s after the request,
		// which may reach the platform as late as the send's deadline when a stalled connection
		// held the send back (the witness's publish, under connection faults). A lookup made
		// while it is in flight answers in_progress, which proves nothing and parks the intent.
		settings, err := json.Marshal(map[string]any{"url": r.simURL, "reconcile_delay": "5s", "status_lookup": i%2 == 1})
		if err != nil {
			return err
		}
		if err := l.AddAccount(ctx, ledger.Account{ID: id, Platform: "sim", Settings: settings}, ledger.Actor{Name: "chaos", Reason: "the chaos suite's accounts"}); err != nil {
			return err
		}
	}
	unlimited, cap3 := 0, 3
	base, maxBackoff := 200*time.Millisecond, 2*time.Second
	_, err = l.SetPolicy(ctx, ledger.GlobalScope, ledger.PolicyEdit{Set: ledger.PolicyOverride{RatePerMinute: &unlimited, AttemptCap: &cap3,
		BackoffBase: &base, BackoffMax: &maxBackoff, RetryableReasons: []ledger.Reason{ledger.ReasonConnectionFailed, ledger.ReasonPlatformRejected,
			ledger.ReasonKillSwitch, ledger.ReasonRateLimited, ledger.ReasonCredentialRotating, ledger.ReasonReconciledNotSent}}}, ledger.Actor{Name: "chaos", Reason: "the chaos suite's policy"})
	return err
}

// chaos kills random roles at random moments for d, restarting each, while the topology's NATS
// faults run on their own schedule (natsFaults; each waits for the one before it to be healed);
// it pauses a dispatcher past its in-flight lease once (two thirds of the way). It returns
// once d passed and every NATS fault was done.
func (r *run) chaos(ctx context.Context, d time.Duration, res *Result) {
	r.began = time.Now()
	natsDone := make(chan natsResult, 1)
	nctx, stopNATS := context.WithCancel(ctx)
	defer stopNATS()
	r.leaders = newLeaders()
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		nc, js, err := r.jetStream()
		if err != nil {
			fmt.Fprintf(r.out, "chaos: the driver could not connect to NATS: %v\n", err)
			natsDone <- natsResult{faults: []string{err.Error()}}
			return
		}
		defer nc.Close()
		var watcher sync.WaitGroup
		if r.opts.Topology.clustered() {
			watcher.Go(func() { r.watchLeaders(nctx, js) })
		}
		natsDone <- r.natsSchedule(nctx, js, d)
		<-nctx.Done() // the leaders are watched until the chaos ends
		watcher.Wait()
	}()

	pauseDone, outageDone, natsOver := false, false, false
	var paused sync.WaitGroup
	for (time.Since(r.began) < d || !natsOver) && ctx.Err() == nil {
		time.Sleep(time.Duration(800+r.rng.IntN(1700)) * time.Millisecond)
		select {
		case n := <-natsDone:
			natsOver = true
			res.NATSRestarts, res.NATSKills, res.LeaderKills, res.NATSPauses = n.restarts, n.kills, n.leaderKills, n.pauses
			res.NATSFaults = n.faults
		default:
		}
		r.restartExited(res)
		elapsed := time.Since(r.began)
		switch {
		case r.opts.ConnectionFaults:
			// The connections' faults are the run's: a role killed or paused would park intents
			// of its own.
		case !outageDone && elapsed > d/3:
			outageDone = true
			fmt.Fprintf(r.out, "chaos: %5s platform outage: every create refused (429) for %s\n", r.elapsed(), OutageFor)
			if err := r.putPlan(ctx, outagePlan); err != nil {
				fmt.Fprintf(r.out, "chaos: the outage did not start: %v\n", err)
				continue
			}
			res.Outages++
			paused.Add(1)
			go func() {
				defer paused.Done()
				time.Sleep(OutageFor)
				if err := r.putPlan(context.WithoutCancel(ctx), r.plan); err != nil {
					fmt.Fprintf(r.out, "chaos: the platform did not come back: %v\n", err)
				}
				fmt.Fprintf(r.out, "chaos: %5s the platform is back\n", r.elapsed())
			}()
		case !pauseDone && elapsed > 2*d/3:
			pauseDone = true
			victim := r.roles["dispatcher-2"]
			fmt.Fprintf(r.out, "chaos: %5s pausing dispatcher-2 (SIGSTOP) past its in-flight lease\n", r.elapsed())
			victim.mu.Lock()
			victim.stopped = true
			victim.mu.Unlock()
			victim.signal(syscall.SIGSTOP)
			res.Pauses++
			paused.Add(1)
			go func() {
				defer paused.Done()
				time.Sleep(9 * time.Second) // in-flight lease 6 s, plus the margin and some
				victim.signal(syscall.SIGCONT)
				victim.mu.Lock()
				victim.stopped = false
				victim.mu.Unlock()
			}()
		default:
			name := r.roleNames[r.rng.IntN(len(r.roleNames))]
			p := r.roles[name]
			p.mu.Lock()
			stopped := p.stopped
			p.mu.Unlock()
			if stopped {
				continue
			}
			fmt.Fprintf(r.out, "chaos: %5s SIGKILL %s\n", r.elapsed(), name)
			p.kill()
			res.Kills[name]++
			time.Sleep(time.Duration(r.rng.IntN(800)) * time.Millisecond)
			if err := p.start(); err != nil {
				fmt.Fprintf(r.out, "chaos: %s did not restart: %v\n", name, err)
			}
		}
	}
	paused.Wait()
	stopNATS()
	<-watching
	res.LeaderChanges = r.leaders.counts()
}

// OutageFor is how long the platform's outage lasts: longer than a probe's longest wait, so
// that probes fail and the accounts hold again before it ends.
const OutageFor = 40 * time.Second

// outagePlan refuses every create with 429, creating nothing: a platform that cannot take
// anything now (the sim adapter declares 429 definitive).
var outagePlan = []byte(`{"seed": 1, "rates": {"rate_limited": 1}}`)

// putPlan sets the platform simulator's fault plan.
func (r *run) putPlan(ctx context.Context, plan []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, r.simURL+"/v1/plan", bytes.NewReader(plan))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return nil
}

// natsSchedule does the topology's NATS faults, each once its moment came and the servers
// were healthy again after the one before, and waits until they are healthy after the last.
func (r *run) natsSchedule(ctx context.Context, js jetstream.JetStream, d time.Duration) natsResult {
	rng := rand.New(rand.NewPCG(uint64(r.opts.Seed), 17))
	var res natsResult
	faults := r.opts.Topology.natsFaults()
	if r.opts.ConnectionFaults {
		faults = nil // NATS's connections are cut by the proxy instead
	}
	for _, f := range faults {
		at := time.Duration(f.at * float64(d))
		select {
		case <-ctx.Done():
			return res
		case <-time.After(time.Until(r.began.Add(at))):
		}
		if err := f.do(ctx, r, js, rng, &res); err != nil {
			fmt.Fprintf(r.out, "chaos: %5s %v\n", r.elapsed(), err)
			res.faults = append(res.faults, err.Error())
		}
		if err := r.waitNATSHealthy(ctx, 3*time.Minute); err != nil {
			fmt.Fprintf(r.out, "chaos: %5s %v\n", r.elapsed(), err)
			res.faults = append(res.faults, err.Error())
		}
	}
	return res
}

// restartExited restarts every role that ended by itself, counting it.
func (r *run) restartExited(res *Result) {
	for _, name := range r.roleNames {
		p := r.roles[name]
		if !p.running() {
			fmt.Fprintf(r.out, "chaos: %5s %s had exited; restarting it\n", r.elapsed(), name)
			res.Exited[name]++
			if err := p.start(); err != nil {
				fmt.Fprintf(r.out, "chaos: %s did not restart: %v\n", name, err)
			}
		}
	}
}

// settle waits until ingest has every producer's message (none waiting, none taken and
// unacknowledged: a message taken by an ingester that was killed comes back only after its ack
// wait), no intent is pending, authorized or indeterminate, the outbox is empty, and nothing
// has moved for five seconds.
func (r *run) settle(ctx context.Context, within time.Duration, res *Result) bool {
	deadline := time.Now().Add(within)
	var last string
	stable := 0
	nc, js, err := r.jetStream()
	if err != nil {
		return false
	}
	defer nc.Close()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(time.Second)
		r.restartExited(res)
		ingest, err := js.Consumer(ctx, events.IntentsStream, "ingest")
		if err != nil {
			continue
		}
		info, err := ingest.Info(ctx)
		if err != nil || info.NumPending > 0 || info.NumAckPending > 0 {
			stable = 0
			continue
		}
		var moving, outbox int
		var sig string
		err = r.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state IN ('pending', 'authorized', 'indeterminate')),
			(SELECT count(*) FROM outbox), (SELECT coalesce(max(seq), 0)::TEXT FROM history) || ':' || count(*)::TEXT FROM intents`).Scan(&moving, &outbox, &sig)
		if err != nil {
			continue
		}
		if moving == 0 && outbox == 0 && sig == last {
			stable++
			if stable >= 5 {
				return true
			}
		} else {
			stable = 0
		}
		last = sig
	}
	return false
}

func (r *run) counts() (platformsim.Counts, error) {
	resp, err := http.Get(r.simURL + "/v1/counts")
	if err != nil {
		return platformsim.Counts{}, err
	}
	defer resp.Body.Close()
	var c platformsim.Counts
	if resp.StatusCode != http.StatusOK {
		return c, fmt.Errorf("counts: %s", resp.Status)
	}
	return c, json.NewDecoder(resp.Body).Decode(&c)
}

// check measures every promise.
func (r *run) check(ctx context.Context, p *producer, res *Result) error {
	c, err := r.counts()
	if err != nil {
		return fmt.Errorf("the platform's count: %w", err)
	}
	res.Duplicates, res.Objects = len(c.KeysOverOne), c.Objects
	if err := r.checkLookups(ctx, c.Lookups, res); err != nil {
		return err
	}

	keys := make([][]byte, 0, len(p.keys))
	for k := range p.keys {
		keys = append(keys, k.Bytes())
	}
	var stored int
	if err := r.pool.QueryRow(ctx, `SELECT count(*) FROM intents WHERE delivery_key = ANY($1)`, keys).Scan(&stored); err != nil {
		return err
	}
	res.Lost = len(keys) - stored

	var sent [][]byte
	for k, n := range c.Created {
		if key, err := identity.ParseDeliveryKey(k); err == nil && n > 0 {
			sent = append(sent, key.Bytes())
		}
	}
	res.ParkedWithObject = map[string]int{}
	unpublished, err := r.pool.Query(ctx, `SELECT delivery_key, state, reason FROM intents WHERE delivery_key = ANY($1) AND state <> 'published' ORDER BY delivery_key`, sent)
	if err != nil {
		return err
	}
	for unpublished.Next() {
		var raw []byte
		var st, reason string
		if err := unpublished.Scan(&raw, &st, &reason); err != nil {
			return err
		}
		key, err := identity.DeliveryKeyFromBytes(raw)
		if err != nil {
			return err
		}
		res.Unpublished = append(res.Unpublished, fmt.Sprintf("%s %s %s", key, st, reason))
		if st == "parked" {
			res.ParkedWithObject[reason]++
			if r.opts.ConnectionFaults && !platformParks[reason] {
				res.ParkedByConnections = append(res.ParkedByConnections, fmt.Sprintf("%s %s", key, reason))
			}
		}
	}
	if err := unpublished.Err(); err != nil {
		return err
	}

	res.States, res.Parked = map[string]int{}, map[string]int{}
	rows, err := r.pool.Query(ctx, `SELECT state, reason, count(*) FROM intents GROUP BY state, reason`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var st, reason string
		var n int
		if err := rows.Scan(&st, &reason, &n); err != nil {
			return err
		}
		res.States[st] += n
		if st == "parked" {
			res.Parked[reason] += n
		}
		if !ledger.State(st).Valid() || st == "pending" || st == "authorized" || st == "indeterminate" {
			res.Undeclared += n
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	l, err := ledger.New(r.pool, ledger.Config{Actor: "chaos"})
	if err != nil {
		return err
	}
	orphans, err := l.Orphans(ctx)
	if err != nil {
		return err
	}
	res.Orphans = orphans.Total()
	return r.checkEvents(ctx, res)
}

// checkLookups compares the platform's lookups per key with the ledger's lookup claims.
func (r *run) checkLookups(ctx context.Context, lookups map[string]int, res *Result) error {
	rows, err := r.pool.Query(ctx, `SELECT delivery_key, count(*) FROM reconciliations WHERE step = 'claimed' GROUP BY delivery_key`)
	if err != nil {
		return err
	}
	claims := map[string]int{}
	for rows.Next() {
		var raw []byte
		var n int
		if err := rows.Scan(&raw, &n); err != nil {
			return err
		}
		key, err := identity.DeliveryKeyFromBytes(raw)
		if err != nil {
			return err
		}
		claims[key.String()] = n
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for key, n := range lookups {
		res.MaxLookupsPerKey = max(res.MaxLookupsPerKey, n)
		if n > claims[key] {
			res.LookupsOverClaims++
		}
	}
	return nil
}

// checkEvents reads ATMOST_EVENTS from the start and compares it with history, row for row.
func (r *run) checkEvents(ctx context.Context, res *Result) error {
	var seen map[transition]int
	// A read that JetStream cuts short (a server that restarted last, a leader elected late)
	// is read again, from the start; an event that does not parse is not.
	var unparsable error
	failures, last := 0, ""
	if err := waitFor(ctx, 2*time.Minute, func() (err error) {
		seen, err = r.readEvents(ctx)
		if errors.Is(err, errUnparsable) {
			unparsable = err
			return nil
		}
		if err != nil {
			if failures++; err.Error() != last {
				fmt.Fprintf(r.out, "chaos: reading ATMOST_EVENTS: %v; again\n", err)
				last = err.Error()
			}
		} else if failures > 0 {
			fmt.Fprintf(r.out, "chaos: read ATMOST_EVENTS after %d failed reads\n", failures)
		}
		return err
	}); err != nil {
		return fmt.Errorf("reading ATMOST_EVENTS: %w", err)
	}
	if unparsable != nil {
		return unparsable
	}
	rows, err := r.pool.Query(ctx, `SELECT delivery_key, seq FROM history`)
	if err != nil {
		return err
	}
	history := map[transition]bool{}
	for rows.Next() {
		var raw []byte
		var seq int64
		if err := rows.Scan(&raw, &seq); err != nil {
			return err
		}
		key, err := identity.DeliveryKeyFromBytes(raw)
		if err != nil {
			return err
		}
		t := transition{key.String(), seq}
		history[t] = true
		switch n := seen[t]; {
		case n == 0:
			res.EventsMissing++
		case n > 1:
			res.EventsDuplicated++
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for t := range seen {
		if !history[t] {
			res.EventsUnknown++
		}
	}
	return nil
}

// transition names one history row: its intent and its sequence number.
type transition struct {
	key string
	seq int64
}

var errUnparsable = errors.New("an event that does not parse")

// readEvents reads ATMOST_EVENTS from the start and counts the copies of each transition. A
// fetch that fails or comes back empty (on a cluster an ordered consumer's fetch often answers
// "no responders" while it recreates its consumer on another server) is tried again, the
// messages delivered again after a reset skipped by their stream sequence, until nothing came
// for a minute.
func (r *run) readEvents(ctx context.Context) (map[transition]int, error) {
	nc, js, err := r.jetStream()
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	stream, err := js.Stream(ctx, events.EventsStream)
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("stream info: %w", err)
	}
	seen := map[transition]int{}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, fmt.Errorf("ordered consumer: %w", err)
	}
	var delivered, read uint64
	retried, progress := 0, time.Now()
	for delivered < info.State.LastSeq {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		n := 0
		if err == nil {
			for m := range batch.Messages() {
				meta, err := m.Metadata()
				if err != nil {
					return nil, fmt.Errorf("fetch: %w", err)
				}
				if meta.Sequence.Stream <= delivered {
					continue
				}
				delivered = meta.Sequence.Stream
				n++
				e, err := events.Unmarshal(m.Data())
				if err != nil {
					return nil, fmt.Errorf("%w: %w", errUnparsable, err)
				}
				seen[transition{e.DeliveryKey.String(), e.Seq}]++
			}
			if err = batch.Error(); errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) {
				err = nil
			}
		}
		read += uint64(n)
		if n > 0 {
			progress = time.Now()
		}
		if err != nil || n == 0 {
			if time.Since(progress) > time.Minute {
				return nil, fmt.Errorf("ATMOST_EVENTS holds %d messages; %d could be read, then nothing for a minute (last: %v)", info.State.Msgs, read, err)
			}
			retried++
			time.Sleep(100 * time.Millisecond)
		}
	}
	if retried > 0 {
		fmt.Fprintf(r.out, "chaos: ATMOST_EVENTS read, %d of its fetches tried again\n", retried)
	}
	if read != info.State.Msgs {
		return nil, fmt.Errorf("ATMOST_EVENTS holds %d messages; %d were read", info.State.Msgs, read)
	}
	return seen, nil
}

func (r *run) stopAll() {
	for _, name := range r.roleNames {
		if p := r.roles[name]; p != nil {
			p.stop(20 * time.Second)
		}
	}
	if r.sim != nil {
		r.sim.stop(5 * time.Second)
	}
	for _, s := range r.nats {
		s.stop(10 * time.Second)
	}
	r.closeProxies()
}

// Report prints the result: who was killed how often (on a cluster also the NATS kills,
// pauses and the leader changes seen), then the verdict line.
func (res Result) Report(w io.Writer) {
	nats := fmt.Sprintf("NATS restarts: %d", res.NATSRestarts)
	if res.Topology.clustered() {
		nats = fmt.Sprintf("NATS kills: %d (%d of a stream's leader), NATS pauses: %d, leader changes: %d (%s)",
			res.NATSKills, res.LeaderKills, res.NATSPauses, sum(res.LeaderChanges), formatCounts(res.LeaderChanges))
	}
	fmt.Fprintf(w, "chaos: %d messages published, %d distinct valid intents accepted, %d objects created; SIGKILLs: %s; %s; dispatcher pauses: %d; platform outages: %d; %s\n",
		res.Produced, res.Accepted, res.Objects, formatCounts(res.Kills), nats, res.Pauses, res.Outages, res.Took.Round(time.Second))
	if len(res.Exited) > 0 {
		fmt.Fprintf(w, "roles that exited by themselves and were restarted: %s\n", formatCounts(res.Exited))
	}
	for _, f := range res.NATSFaults {
		fmt.Fprintf(w, "a NATS fault not done as meant: %s\n", f)
	}
	if res.EventsDuplicated+res.EventsUnknown > 0 {
		fmt.Fprintf(w, "events_duplicated: %d, events_unknown: %d\n", res.EventsDuplicated, res.EventsUnknown)
	}
	fmt.Fprintln(w, res.Line())
	if len(res.Parked) > 0 {
		fmt.Fprintf(w, "parked by reason: %s\n", formatCounts(res.Parked))
	}
	for _, u := range res.Unpublished {
		fmt.Fprintf(w, "an object on the platform, its intent not published (a person decides): %s\n", u)
	}
	res.reportConnections(w)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
