package main

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// A part is where some of this process's CPU goes. A profile sample belongs to the first part
// (in goParts' order) of which any function on its stack is a member, so a send that the
// dispatcher makes through net/http is HTTP, and a publish that the relay makes through
// nats.go is NATS: the parts are the libraries an intent passes through, and "the product"
// keeps only what atmost's (or River's) own code spends itself.
type part struct {
	name   string
	member *regexp.Regexp // matches the functions of the part, by their full names
	except *regexp.Regexp // nil, or functions member matches that are not the part's
}

func (p part) has(function string) bool {
	return p.member.MatchString(function) && (p.except == nil || !p.except.MatchString(function))
}

// benchmarkCode is this program's own code (named main when run, by its import path in its
// tests), the test kit's and the tools': neither side's product.
const benchmarkCode = `^main\.|^github\.com/atmost/atmost/(bench/peer|internal/testkit|internal/tools)[./]`

// goParts are the parts -parts reports, in the order a sample is given to them. Both sides
// have every part but NATS, which only atmost stands on. River's worker (postWorker) is HTTP,
// as atmost's adapters are: it builds the post and reads the object back, the job both sides
// do. What is left of the benchmark's own (the producer's loop, the polling for a run's end)
// is a part of its own, last, so that what it calls of either side counts as that side's.
var goParts = []part{
	{name: "NATS", member: regexp.MustCompile(`^github\.com/nats-io/`)},
	{name: "HTTP", member: regexp.MustCompile(`^net/http[./]|^github\.com/atmost/atmost/pkg/platform/|^(main|github\.com/atmost/atmost/bench/peer)\.\(\*postWorker\)\.`)},
	{name: "the collector", member: regexp.MustCompile(`^runtime\.(gcBgMarkWorker|bgsweep|bgscavenge)$`)},
	{name: "pgx", member: regexp.MustCompile(`^github\.com/jackc/`)},
	{name: "the scheduler", member: regexp.MustCompile(`^runtime\.(schedule|findRunnable|park_m|mcall)$`)},
	{name: "the product", member: regexp.MustCompile(`^github\.com/(atmost/atmost|riverqueue/river)[./]`), except: regexp.MustCompile(benchmarkCode)},
	{name: "the benchmark", member: regexp.MustCompile(benchmarkCode)},
}

// partNames lists goParts' names in their order, and theRest's last: the order -parts prints.
func partNames() []string {
	names := make([]string, 0, len(goParts)+1)
	for _, p := range goParts {
		names = append(names, p.name)
	}
	return append(names, theRest)
}

// theRest names the samples of no part: the runtime's own timers and signals, and the like.
const theRest = "the rest"

// partsProfile is a CPU profile of this process over one run. It stays in memory: only the
// parts' shares of it are reported, so there is no file to name or clean up per run.
type partsProfile struct {
	buf     bytes.Buffer
	stopped bool
}

// startParts starts profiling this process's CPU, or does nothing when on is false (a nil
// profile, whose stop gives no shares). Go runs one CPU profile at a time, so -parts and
// -cpuprofile are refused together.
func startParts(on bool) (*partsProfile, error) {
	if !on {
		return nil, nil
	}
	p := &partsProfile{}
	if err := pprof.StartCPUProfile(&p.buf); err != nil {
		return nil, fmt.Errorf("-parts: %w", err)
	}
	return p, nil
}

// stop ends the profile and gives each part's share of its CPU time: shares, not times,
// because sampling at 100 Hz sees less than the process spent (printParts scales them).
func (p *partsProfile) stop() (map[string]float64, error) {
	if p == nil || p.stopped {
		return nil, nil
	}
	p.stopped = true
	pprof.StopCPUProfile()
	prof, err := profile.Parse(&p.buf)
	if err != nil {
		return nil, fmt.Errorf("-parts: %w", err)
	}
	return partShares(prof, goParts)
}

// abandon ends the profile of a run that failed, so the next run (or -parts' next side) can
// start one; it does nothing once stop has run.
func (p *partsProfile) abandon() {
	if p != nil && !p.stopped {
		p.stopped = true
		pprof.StopCPUProfile()
	}
}

// partShares gives each of parts (and theRest) its share of prof's CPU time, each sample to
// the first part any function on its stack, inlined ones included, belongs to.
func partShares(prof *profile.Profile, parts []part) (map[string]float64, error) {
	value := -1
	for i, st := range prof.SampleType {
		if st.Type == "cpu" {
			value = i
		}
	}
	if value < 0 {
		return nil, fmt.Errorf("-parts: the profile has no cpu values")
	}
	spent := map[string]int64{}
	var all int64
	for _, s := range prof.Sample {
		v := s.Value[value]
		all += v
		first := len(parts)
		for _, loc := range s.Location {
			for _, line := range loc.Line {
				if line.Function == nil {
					continue
				}
				for i := range first {
					if parts[i].has(line.Function.Name) {
						first = i
						break
					}
				}
			}
		}
		name := theRest
		if first < len(parts) {
			name = parts[first].name
		}
		spent[name] += v
	}
	shares := map[string]float64{}
	if all == 0 {
		return shares, nil
	}
	for name, v := range spent {
		shares[name] = float64(v) / float64(all)
	}
	return shares, nil
}

// printParts writes, after indent, the Go CPU per intent of each part. The profile samples
// at 100 Hz, so a part's figure is its share of the profile's CPU time times the process's
// own CPU time per intent, the figure the rest of the report gives.
func printParts(out io.Writer, indent string, shares map[string]float64, goCPU time.Duration, n int) {
	if shares == nil {
		return
	}
	each := perIntent(goCPU, n)
	var b strings.Builder
	for _, name := range partNames() {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.3f", name, shares[name]*each)
	}
	fmt.Fprintf(out, "%sGo CPU per intent by part, ms (a CPU profile of the run): %s\n", indent, b.String())
}
