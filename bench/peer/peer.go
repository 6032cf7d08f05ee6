package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/atmost/atmost/internal/tools/platformsim"
)

// sideResult is what one side of the peer run measured.
type sideResult struct {
	name         string
	took         time.Duration // from the first publish or insert to the last intent settled
	goCPU, pgCPU time.Duration
	counts       platformsim.Counts
	detail       string
	parts        map[string]float64 // -parts: each part's share of the process's CPU
}

func (r sideResult) rate(n int) float64 { return float64(n) / r.took.Seconds() }

func runPeer(ctx context.Context, o options, out io.Writer, logs io.Writer) error {
	faults := "none"
	if o.faults > 0 {
		faults = fmt.Sprintf("%.1f %% of creates committed, then the connection dropped without an answer", o.faults*100)
	}
	fmt.Fprintf(out, "peer: %s intents, one post and one read-back each, platform latency %s, faults: %s; atmost's ledger at %s\n",
		thousands(float64(o.intents)), o.latency, faults, o.isolation)
	before, err := commitCeiling(ctx, o.adminURL)
	if err != nil {
		return fmt.Errorf("commit ceiling: %w", err)
	}
	fmt.Fprintf(out, "PostgreSQL single-row commit ceiling before: %s commits/s (%d connections, %s)\n", thousands(before), ceilingWorkers, ceilingWindow)

	intents := make([]intent, o.intents)
	for i := range intents {
		if intents[i], err = newIntent("peer", i); err != nil {
			return err
		}
	}
	rates := map[string][]float64{}
	var ratios []string
	for round := 1; round <= o.rounds; round++ {
		if o.rounds > 1 {
			fmt.Fprintf(out, "round %d of %d\n", round, o.rounds)
		}
		this := map[string]float64{}
		for _, side := range o.sides {
			var r sideResult
			switch side {
			case "atmost":
				r, err = peerAtmost(ctx, o, intents, "webhook", logs)
			case "river":
				r, err = peerRiver(ctx, o, intents, logs)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", side, err)
			}
			this[side] = r.rate(o.intents)
			rates[side] = append(rates[side], this[side])
			printSide(out, o.intents, r)
		}
		if a, r := this["atmost"], this["river"]; a > 0 && r > 0 {
			ratios = append(ratios, fmt.Sprintf("%.2fx", a/r))
		}
	}
	after, err := commitCeiling(ctx, o.adminURL)
	if err != nil {
		return fmt.Errorf("commit ceiling: %w", err)
	}
	fmt.Fprintf(out, "PostgreSQL single-row commit ceiling after: %s commits/s\n", thousands(after))
	if len(ratios) > 0 {
		a, r := median(rates["atmost"]), median(rates["river"])
		fmt.Fprintf(out, "ratio atmost / River: %.2fx (%s against %s intents a second", a/r, thousands(a), thousands(r))
		if o.rounds > 1 {
			fmt.Fprintf(out, ", the medians of %d rounds; round by round %s", o.rounds, strings.Join(ratios, ", "))
		}
		fmt.Fprintln(out, ")")
	}
	return nil
}

func printSide(out io.Writer, n int, r sideResult) {
	keys, extra := duplicates(r.counts)
	fmt.Fprintf(out, "%-6s %s intents in %.2f s: %s intents/s; CPU per intent: Go %.3f ms, PostgreSQL %.3f ms (the side's own backends)\n",
		r.name, thousands(float64(n)), r.took.Seconds(), thousands(r.rate(n)), perIntent(r.goCPU, n), perIntent(r.pgCPU, n))
	fmt.Fprintf(out, "       platform: %d create requests, %d objects for %d keys; duplicates: %d keys with more than one object (%.2f %% of intents), %d objects too many; %s\n",
		r.counts.Requests, r.counts.Objects, len(r.counts.Created), keys, 100*float64(keys)/float64(n), extra, r.detail)
	printParts(out, "       ", r.parts, r.goCPU, n)
}

// peerAtmost delivers intents through atmost as a burst, its account on adapter (the peer job's
// is webhook: one read-back per object, as River's worker reads).
func peerAtmost(ctx context.Context, o options, intents []intent, adapter string, logs io.Writer) (sideResult, error) {
	s, err := startAtmost(ctx, o, platformConfig(o.latency, o.faults, o.seed), adapter, logs)
	if err != nil {
		return sideResult{}, err
	}
	defer s.close()
	window, err := openWindow(ctx, s.pool, s.db.name, o.parts)
	if err != nil {
		return sideResult{}, err
	}
	defer window.abandon()
	start := time.Now()
	for _, in := range intents {
		if err := s.publish(in); err != nil {
			return sideResult{}, err
		}
	}
	if err := s.awaitPublished(ctx); err != nil {
		return sideResult{}, err
	}
	end, err := s.settle(ctx, len(intents), o.timeout)
	if err != nil {
		return sideResult{}, err
	}
	r := sideResult{name: "atmost", took: end.Sub(start), counts: s.sim.Counts()}
	if r.goCPU, r.pgCPU, r.parts, err = window.close(ctx); err != nil {
		return sideResult{}, err
	}
	states, err := s.states(ctx)
	if err != nil {
		return sideResult{}, err
	}
	var parts []string
	for st, n := range states {
		parts = append(parts, fmt.Sprintf("%s %d", st, n))
	}
	sort.Strings(parts)
	r.detail = fmt.Sprintf("intents %s; %d lookups", strings.Join(parts, ", "), total(r.counts.Lookups))
	return r, nil
}

func peerRiver(ctx context.Context, o options, intents []intent, logs io.Writer) (sideResult, error) {
	s, err := startRiver(ctx, o, platformConfig(o.latency, o.faults, o.seed), logs)
	if err != nil {
		return sideResult{}, err
	}
	defer s.close()
	window, err := openWindow(ctx, s.pool, s.db.name, o.parts)
	if err != nil {
		return sideResult{}, err
	}
	defer window.abandon()
	start := time.Now()
	if err := s.insert(ctx, intents, o.riverInsert); err != nil {
		return sideResult{}, err
	}
	end, err := s.settle(ctx, len(intents), o.timeout)
	if err != nil {
		return sideResult{}, err
	}
	r := sideResult{name: "river", took: end.Sub(start), counts: s.sim.Counts()}
	if r.goCPU, r.pgCPU, r.parts, err = window.close(ctx); err != nil {
		return sideResult{}, err
	}
	attempts, err := s.attempts(ctx)
	if err != nil {
		return sideResult{}, err
	}
	r.detail = fmt.Sprintf("jobs completed %d after %d attempts (%d workers, inserts of %d, a pool of %d)", len(intents), attempts, o.riverWork, o.riverInsert, o.riverConns)
	return r, nil
}

// median is the middle value of xs (the mean of the two middle ones for an even count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
