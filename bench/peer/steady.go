package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/atmost/atmost/internal/testkit/benchtest"
)

// steadyResult is one rate at one platform latency.
type steadyResult struct {
	rate                           float64
	latency                        time.Duration
	n                              int
	reached                        float64       // intents per second from the first publish to the last published
	stored                         summary       // to the intent's first row: ingest wrote it
	claimed, authorized, published summary       // to Begin's, Authorize's and Complete's rows
	late                           time.Duration // how far the producer fell behind its schedule at worst
	goCPU, pgCPU                   time.Duration
	batch                          map[string]float64 // intents a transaction, by stage: pending (Submit), claimed (Begin), authorized, published (Complete)
	wal                            int64              // bytes of WAL the server wrote over the run, all its databases
	parts                          map[string]float64 // -parts: each part's share of the process's CPU
}

func runSteady(ctx context.Context, o options, out io.Writer, logs io.Writer) error {
	fmt.Fprintf(out, "steady: atmost (ingest, dispatcher, sweeper, reconciler), %s adapter, ledger at %s preloaded with %s published intents, each rate published for %s (open loop)\n",
		o.adapter, o.isolation, thousands(float64(o.preload)), o.duration)
	before, err := commitCeiling(ctx, o.adminURL)
	if err != nil {
		return fmt.Errorf("commit ceiling: %w", err)
	}
	fmt.Fprintf(out, "PostgreSQL single-row commit ceiling before: %s commits/s (%d connections, %s)\n", thousands(before), ceilingWorkers, ceilingWindow)
	for _, latency := range o.latencies {
		rates := o.rates
		if slices.Contains(o.rates, 0) {
			maximum, err := measureMaximum(ctx, o, latency, logs)
			if err != nil {
				return fmt.Errorf("atmost's maximum at %s: %w", latency, err)
			}
			fmt.Fprintf(out, "atmost's maximum at platform latency %s: %s intents/s (a burst of %s); half of it: %s/s\n",
				latency, thousands(maximum), thousands(float64(o.intents)), thousands(half(maximum)))
			rates = withHalf(o.rates, maximum)
		}
		for _, rate := range rates {
			r, err := steadyRun(ctx, o, rate, latency, logs)
			if err != nil {
				return fmt.Errorf("rate %v/s at %s: %w", rate, latency, err)
			}
			fmt.Fprintf(out, "rate %s/s, platform latency %s: %s intents, reached %s/s, the producer at most %s ms late\n",
				thousands(r.rate), r.latency, thousands(float64(r.n)), thousands(r.reached), ms(r.late))
			for _, q := range []struct {
				name string
				s    summary
			}{{"publish to stored    ", r.stored}, {"publish to claimed   ", r.claimed}, {"publish to authorized", r.authorized}, {"publish to published ", r.published}} {
				fmt.Fprintf(out, "  %s  p50 %s  p99 %s  p99.9 %s  max %s ms\n", q.name, ms(q.s.p50), ms(q.s.p99), ms(q.s.p999), ms(q.s.maxLat))
			}
			fmt.Fprintf(out, "  CPU per intent: Go %.3f ms, PostgreSQL %.3f ms (the run's own backends)\n", perIntent(r.goCPU, r.n), perIntent(r.pgCPU, r.n))
			fmt.Fprintf(out, "  intents a batch: Submit %.1f, Begin %.1f, Authorize %.1f, Complete %.1f; WAL %.1f kB per intent (the server's, all its databases)\n",
				r.batch["pending"], r.batch["claimed"], r.batch["authorized"], r.batch["published"], float64(r.wal)/1024/float64(r.n))
			printParts(out, "  ", r.parts, r.goCPU, r.n)
		}
	}
	after, err := commitCeiling(ctx, o.adminURL)
	if err != nil {
		return fmt.Errorf("commit ceiling: %w", err)
	}
	fmt.Fprintf(out, "PostgreSQL single-row commit ceiling after: %s commits/s\n", thousands(after))
	fmt.Fprintln(out, "times: from the moment the producer was due to publish to the ledger's history row (its transaction's start, PostgreSQL's now())")
	return nil
}

// halfMaximum in -rates is half of atmost's maximum rate.
const halfMaximum = "half"

// half is half of maximum, a whole rate of at least one intent a second.
func half(maximum float64) float64 { return max(1, math.Round(maximum/2)) }

// withHalf is rates with half of maximum in the place of half (its 0).
func withHalf(rates []float64, maximum float64) []float64 {
	out := slices.Clone(rates)
	for i, r := range out {
		if r == 0 {
			out[i] = half(maximum)
		}
	}
	return out
}

// measureMaximum is the rate at which atmost delivers a burst of o.intents at the platform
// latency latency on o.adapter: the peer mode's atmost side, on a stack of its own and a new
// ledger (the steady runs' is preloaded).
func measureMaximum(ctx context.Context, o options, latency time.Duration, logs io.Writer) (float64, error) {
	intents := make([]intent, o.intents)
	for i := range intents {
		var err error
		if intents[i], err = newIntent("maximum", i); err != nil {
			return 0, err
		}
	}
	o.latency, o.faults = latency, 0
	o.parts = false // the burst only finds the rate; its parts would not be printed
	r, err := peerAtmost(ctx, o, intents, o.adapter, logs)
	if err != nil {
		return 0, err
	}
	return r.rate(o.intents), nil
}

// steadyRun publishes rate intents a second for o.duration to a fresh stack, each at its due
// time whatever the pipeline does, and measures every intent from its due time.
func steadyRun(ctx context.Context, o options, rate float64, latency time.Duration, logs io.Writer) (steadyResult, error) {
	s, err := startAtmost(ctx, o, platformConfig(latency, 0, 0), o.adapter, logs)
	if err != nil {
		return steadyResult{}, err
	}
	defer s.close()
	if err := benchtest.Preload(ctx, s.pool, account, o.preload); err != nil {
		return steadyResult{}, err
	}
	n := max(1, int(rate*o.duration.Seconds()))
	intents := make([]intent, n)
	index := make(map[[32]byte]int, n)
	for i := range intents {
		if intents[i], err = newIntent("steady", i); err != nil {
			return steadyResult{}, err
		}
		index[[32]byte(intents[i].key.Bytes())] = i
	}
	due := make([]time.Time, n)
	window, err := openWindow(ctx, s.pool, s.db.name, o.parts)
	if err != nil {
		return steadyResult{}, err
	}
	defer window.abandon()
	var walBefore string
	if err := s.pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::TEXT`).Scan(&walBefore); err != nil {
		return steadyResult{}, err
	}
	r := steadyResult{rate: rate, latency: latency, n: n}
	start := time.Now()
	for i, in := range intents {
		due[i] = start.Add(time.Duration(float64(i) * float64(time.Second) / rate))
		if wait := time.Until(due[i]); wait > 0 {
			select {
			case <-ctx.Done():
				return steadyResult{}, ctx.Err()
			case <-time.After(wait):
			}
		}
		r.late = max(r.late, time.Since(due[i]))
		if err := s.publish(in); err != nil {
			return steadyResult{}, err
		}
	}
	if err := s.awaitPublished(ctx); err != nil {
		return steadyResult{}, err
	}
	if _, err := s.settle(ctx, n, o.timeout); err != nil {
		return steadyResult{}, err
	}
	if r.goCPU, r.pgCPU, r.parts, err = window.close(ctx); err != nil {
		return steadyResult{}, err
	}
	if err := s.pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::BIGINT`, walBefore).Scan(&r.wal); err != nil {
		return steadyResult{}, err
	}

	// A claim is a transition into pending with reason claimed, the intent's creation the
	// first into pending.
	// A history row's xmin is the transaction that wrote it: the intents of one stage that
	// share one were one batch of that stage.
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT ON (delivery_key, stage) delivery_key, stage, at, tx
		FROM (SELECT delivery_key, seq, at, xmin::TEXT AS tx, CASE WHEN reason = 'claimed' THEN 'claimed' ELSE to_state END AS stage
		      FROM history WHERE actor <> 'preload') h
		WHERE stage IN ('pending', 'claimed', 'authorized', 'published') ORDER BY delivery_key, stage, seq`)
	if err != nil {
		return steadyResult{}, err
	}
	var toStored, toClaimed, toAuthorized, toPublished []time.Duration
	var last time.Time
	var key []byte
	var state, tx string
	var at time.Time
	txs := map[string]map[string]bool{}
	_, err = pgx.ForEachRow(rows, []any{&key, &state, &at, &tx}, func() error {
		i, ok := index[[32]byte(key)]
		if !ok {
			return fmt.Errorf("a history row of a key the producer did not publish")
		}
		if txs[state] == nil {
			txs[state] = map[string]bool{}
		}
		txs[state][tx] = true
		d := at.Sub(due[i])
		switch state {
		case "pending":
			toStored = append(toStored, d)
		case "claimed": // the first claim, as the first authorization and the first publication
			toClaimed = append(toClaimed, d)
		case "authorized":
			toAuthorized = append(toAuthorized, d)
		default:
			toPublished = append(toPublished, d)
			if at.After(last) {
				last = at
			}
		}
		return nil
	})
	if err != nil {
		return steadyResult{}, err
	}
	if len(toPublished) != n {
		return steadyResult{}, fmt.Errorf("%d of %d intents published", len(toPublished), n)
	}
	r.stored, r.claimed, r.authorized, r.published = summarize(toStored), summarize(toClaimed), summarize(toAuthorized), summarize(toPublished)
	r.batch = map[string]float64{}
	for stage, ds := range map[string][]time.Duration{"pending": toStored, "claimed": toClaimed, "authorized": toAuthorized, "published": toPublished} {
		if len(txs[stage]) > 0 {
			r.batch[stage] = float64(len(ds)) / float64(len(txs[stage]))
		}
	}
	r.reached = float64(n) / last.Sub(start).Seconds()
	return r, nil
}
