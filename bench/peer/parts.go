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
}

// goParts are the parts -parts reports, in the order a sample is given to them. Both sides
// have every part but NATS, which only atmost stands on. The benchmark's own code (this
// program's, as main or as a test, and the test kit's) is a part of its own: the producer's
// loop and the polling for the end of a run are neither side's.
var goParts = []part{
	{"NATS", regexp.MustCompile(`^github\.com/nats-io/`)},
	{"HTTP", regexp.MustCompile(`^net/http[./]|^github\.com/atmost/atmost/pkg/platform/`)},
	{"the collector", regexp.MustCompile(`^runtime\.(gcBgMarkWorker|bgsweep|bgscavenge)$`)},
	{"pgx", regexp.MustCompile(`^github\.com/jackc/`)},
	{"the scheduler", regexp.MustCompile(`^runtime\.(schedule|findRunnable|park_m|mcall)$`)},
	{"the benchmark", regexp.MustCompile(`^main\.|^github\.com/atmost/atmost/(bench/peer|internal/testkit|internal/tools)[./]`)},
	{"the product", regexp.MustCompile(`^github\.com/(atmost/atmost|riverqueue/river)[./]`)},
}

// theRest names the samples of no part: the runtime's own timers and signals, and the like.
const theRest = "the rest"

// partsProfile is a CPU profile of this process over one run, kept in memory.
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

// stop ends the profile and gives each part's share of its CPU samples.
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
					if parts[i].member.MatchString(line.Function.Name) {
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

// printParts writes, after indent, the Go CPU per intent of each part: its share of the profile's samples
// times what the process spent per intent (the profile samples at 100 Hz; the process's own
// CPU time is the figure the rest of the report gives).
func printParts(out io.Writer, indent string, shares map[string]float64, goCPU time.Duration, n int) {
	if shares == nil {
		return
	}
	each := perIntent(goCPU, n)
	var b strings.Builder
	for _, p := range append(goParts, part{name: theRest}) {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.3f", p.name, shares[p.name]*each)
	}
	fmt.Fprintf(out, "%sGo CPU per intent by part, ms (a CPU profile of the run): %s\n", indent, b.String())
}
