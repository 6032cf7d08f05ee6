// Command peer measures atmost against the obvious alternative, and under a steady load.
//
// Mode peer (the default, `make bench-peer`) runs one job twice in one process, against the
// same PostgreSQL server: N intents, each a post on an HTTP platform (the platform simulator,
// one object per create it commits, no deduplication) followed by one read-back of the
// created object. First through atmost, the production roles (ingest, dispatcher, sweeper,
// reconciler) as `atmost dev` runs them, with the webhook adapter; then through a River
// at-least-once pipeline, whose worker posts with the delivery key as Idempotency-Key, reads
// the object back, and returns an error (River retries) on anything else. It prints each
// side's rate, CPU per intent and duplicates, and the ratio of the rates. -faults drops that
// share of the creates after the platform committed them: River retries and creates a second
// object, atmost records an unknown outcome and resolves it with one lookup.
//
// Mode steady (`make bench-steady`) publishes to atmost at a fixed rate for a while (open
// loop: the schedule does not wait for the pipeline) and prints the p50, p99 and p99.9 of
// publish to authorized and publish to published, for each rate and platform latency asked.
//
// Every side gets a fresh database, dropped at the end (their names start with
// atmost_test_peer_, so `make clean-test-databases` removes those an interrupted run left),
// and a fresh simulator. River lives in this module only, never in atmost's.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/atmost/atmost/internal/role"
	"github.com/atmost/atmost/internal/testkit/dbtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command line of both modes.
type options struct {
	mode      string
	adminURL  string
	isolation string
	logPath   string
	timeout   time.Duration

	// peer
	intents     int
	faults      float64
	latency     time.Duration
	sides       []string
	rounds      int
	riverWork   int
	riverConns  int
	riverFetch  time.Duration
	riverRetry  time.Duration
	riverInsert int
	seed        int64

	// steady
	rates     []float64 // steady: 0 stands for half the maximum (-rates half)
	latencies []time.Duration
	duration  time.Duration
	adapter   string
	preload   int

	cpuProfile string
	parts      bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "peer: %v\n", err)
		return 2
	}
	// As every role does at start; both sides then run under the same collector target.
	role.TuneGC()
	logs := io.Discard
	if o.logPath != "" {
		f, err := os.Create(o.logPath)
		if err != nil {
			fmt.Fprintf(stderr, "peer: -log: %v\n", err)
			return 2
		}
		defer f.Close()
		logs = f
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "peer: -cpuprofile: %v\n", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "peer: -cpuprofile: %v\n", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	switch o.mode {
	case "peer":
		err = runPeer(ctx, o, stdout, logs)
	case "steady":
		err = runSteady(ctx, o, stdout, logs)
	}
	if err != nil {
		fmt.Fprintf(stderr, "peer: %v\n", err)
		return 1
	}
	return 0
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("peer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	admin := os.Getenv("ATMOST_TEST_DATABASE_URL")
	if admin == "" {
		admin = dbtest.DefaultAdminURL
	}
	fs.StringVar(&o.mode, "mode", "peer", "peer (atmost and River, the same job) or steady (atmost at fixed publish rates)")
	fs.StringVar(&o.adminURL, "database-url", admin, "a PostgreSQL server and a database to connect to first; each side gets a fresh database there, dropped after (env ATMOST_TEST_DATABASE_URL)")
	fs.StringVar(&o.isolation, "isolation", "read-committed", "the ledger's isolation: read-committed or serializable")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (both sides, setup included; -sides atmost for one) to this file")
	fs.BoolVar(&o.parts, "parts", false, "print where this process's CPU went in each run, per intent, by part: "+strings.Join(partNames(), ", ")+" (not with -cpuprofile)")
	fs.StringVar(&o.logPath, "log", "", "write the atmost roles' JSON logs and River's warnings to this file (default: discarded)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long one side may take before the run fails")
	fs.IntVar(&o.intents, "intents", 20000, "peer: intents each side delivers; steady: the burst that measures the maximum of -rates half")
	fs.Float64Var(&o.faults, "faults", 0, "peer: share of creates the platform commits and then drops the connection of, without an answer (0.05 is 5 %)")
	fs.DurationVar(&o.latency, "latency", 0, "peer: the platform's latency on every create")
	sides := fs.String("sides", "atmost,river", "peer: the sides to run, in this order")
	fs.IntVar(&o.rounds, "rounds", 1, "peer: run the sides this many times, alternating, and compare the median rates (the machine's load moves between runs)")
	fs.IntVar(&o.riverWork, "river-workers", 1000, "peer: River's MaxWorkers on its one queue; with River's fetch cooldown of 100ms, 100 workers (River's default) cap it at 1,000 jobs/s")
	fs.DurationVar(&o.riverFetch, "river-fetch-cooldown", 100*time.Millisecond, "peer: River's FetchCooldown, the least time between two fetches of jobs (River's default 100ms)")
	fs.DurationVar(&o.riverRetry, "river-retry", time.Second, "peer: how long River waits before it tries a failed job again, every time (0: River's default, attempt^4 seconds); 1s is atmost's reconcile delay here")
	fs.IntVar(&o.riverConns, "river-conns", 16, "peer: River's connection pool (the atmost roles hold 4 each, 16 in all)")
	fs.IntVar(&o.riverInsert, "river-insert-batch", 500, "peer: jobs per InsertManyFast of River's producer (atmost's ingest takes batches of 500)")
	fs.Int64Var(&o.seed, "seed", 1, "peer: seed of the platform's fault draws")
	rates := fs.String("rates", "200,1000,half", "steady: publish rates, intents per second, comma-separated; half is half of atmost's maximum, measured first at each platform latency (a burst of -intents, as this program's peer mode runs atmost's side)")
	latencies := fs.String("latencies", "0,50ms", "steady: platform latencies, comma-separated")
	fs.DurationVar(&o.duration, "duration", 60*time.Second, "steady: how long each rate is published")
	fs.IntVar(&o.preload, "preload", 100000, "steady: published intents written into the ledger before the run and analyzed, as a ledger that has been running holds (0: a new, empty ledger, whose first cached plans fit empty tables where autovacuum is off)")
	fs.StringVar(&o.adapter, "adapter", "webhook", "steady: the account's adapter: webhook (one read-back per object) or sim (read-backs grouped)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: go run . [flags]   (in bench/peer)\n\nThe same job through atmost and through River (-mode peer), or atmost at fixed publish rates (-mode steady).\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	switch {
	case o.mode != "peer" && o.mode != "steady":
		return o, fmt.Errorf("-mode %q: must be peer or steady", o.mode)
	case o.isolation != "read-committed" && o.isolation != "serializable":
		return o, fmt.Errorf("-isolation %q: must be read-committed or serializable", o.isolation)
	case o.rounds < 1:
		return o, fmt.Errorf("-rounds %d: must be at least 1", o.rounds)
	case o.intents < 1:
		return o, fmt.Errorf("-intents %d: must be at least 1", o.intents)
	case o.faults < 0 || o.faults > 1:
		return o, fmt.Errorf("-faults %v: must be between 0 and 1", o.faults)
	case o.latency < 0:
		return o, fmt.Errorf("-latency %s: must not be negative", o.latency)
	case o.riverRetry < 0:
		return o, errors.New("-river-retry must not be negative")
	case o.riverFetch < time.Millisecond:
		return o, errors.New("-river-fetch-cooldown must be at least 1ms (River's minimum)")
	case o.riverWork < 1 || o.riverConns < 2 || o.riverInsert < 1:
		return o, errors.New("-river-workers and -river-insert-batch must be at least 1, -river-conns at least 2")
	case o.duration <= 0 || o.timeout <= 0:
		return o, errors.New("-duration and -timeout must be positive")
	case o.adapter != "webhook" && o.adapter != "sim":
		return o, fmt.Errorf("-adapter %q: must be webhook or sim", o.adapter)
	case o.parts && o.cpuProfile != "":
		return o, errors.New("-parts and -cpuprofile: Go runs one CPU profile at a time; give one of them")
	}
	for _, s := range strings.Split(*sides, ",") {
		if s = strings.TrimSpace(s); s != "atmost" && s != "river" {
			return o, fmt.Errorf("-sides: %q is neither atmost nor river", s)
		}
		o.sides = append(o.sides, strings.TrimSpace(s))
	}
	for _, s := range strings.Split(*rates, ",") {
		if strings.TrimSpace(s) == halfMaximum {
			if slices.Contains(o.rates, 0) {
				return o, fmt.Errorf("-rates: %s given twice", halfMaximum)
			}
			o.rates = append(o.rates, 0) // its place in the order; runSteady measures it
			continue
		}
		r, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || r <= 0 {
			return o, fmt.Errorf("-rates: %q is neither a positive rate nor %s", s, halfMaximum)
		}
		o.rates = append(o.rates, r)
	}
	for _, s := range strings.Split(*latencies, ",") {
		s = strings.TrimSpace(s)
		if s == "0" {
			s = "0s"
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return o, fmt.Errorf("-latencies: %q is not a duration", s)
		}
		o.latencies = append(o.latencies, d)
	}
	return o, nil
}
