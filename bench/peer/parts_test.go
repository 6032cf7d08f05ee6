package main

import (
	"bytes"
	"io"
	"math"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/atmost/atmost/internal/testkit/benchtest"
)

// stackProfile is a CPU profile whose samples are the given stacks (leaf first, each frame a
// location of one function, or of several where a frame lists inlined ones with "+") with
// their CPU nanoseconds.
func stackProfile(samples map[string]int64) *profile.Profile {
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}}}
	funcs := map[string]*profile.Function{}
	fn := func(name string) *profile.Function {
		if funcs[name] == nil {
			funcs[name] = &profile.Function{ID: uint64(len(funcs) + 1), Name: name}
			p.Function = append(p.Function, funcs[name])
		}
		return funcs[name]
	}
	for stack, ns := range samples {
		s := &profile.Sample{Value: []int64{1, ns}}
		for _, frame := range strings.Split(stack, " ") {
			loc := &profile.Location{ID: uint64(len(p.Location) + 1)}
			for _, name := range strings.Split(frame, "+") {
				loc.Line = append(loc.Line, profile.Line{Function: fn(name)})
			}
			p.Location = append(p.Location, loc)
			s.Location = append(s.Location, loc)
		}
		p.Sample = append(p.Sample, s)
	}
	return p
}

func TestASampleBelongsToTheFirstPartOnItsStack(t *testing.T) {
	prof := stackProfile(map[string]int64{
		// The relay publishing through nats.go: NATS, though atmost's code is on the stack.
		"syscall.write github.com/nats-io/nats%2ego.(*Conn).publish github.com/atmost/atmost/internal/relay.(*Relay).round": 10,
		// atmost's handler called by nats.go: NATS too, the part that comes first, not the
		// one nearest the leaf.
		"github.com/atmost/atmost/pkg/identity.parseID github.com/atmost/atmost/internal/role/ingest.(*Ingester).handle github.com/nats-io/nats%2ego.(*Conn).waitForMsgs": 3,
		// A function a frame holds inlined counts: strings.HasPrefix inlined into the server's
		// function, whose frame is the leaf, nothing else of NATS on the stack.
		"strings.HasPrefix+github.com/nats-io/nats-server/v2/server.(*client).processHeaderPub runtime.goexit": 2,
		// The dispatcher's send through the adapter and net/http: HTTP.
		"net/http.(*persistConn).writeLoop github.com/atmost/atmost/pkg/platform/webhook.(*adapter).Send github.com/atmost/atmost/internal/role/dispatch.(*Dispatcher).send": 14,
		// The simulator's server: HTTP, the platform's end.
		"github.com/atmost/atmost/internal/tools/platformsim.(*Sim).create net/http.(*conn).serve": 10,
		// River's worker, which posts and reads back as atmost's adapters do: HTTP, whether the
		// program runs (main) or its tests do.
		"encoding/json.Marshal main.(*postWorker).Work github.com/riverqueue/river.(*jobExecutor).execute":                                4,
		"encoding/json.Marshal github.com/atmost/atmost/bench/peer.(*postWorker).Work github.com/riverqueue/river.(*jobExecutor).execute": 2,
		// A ledger call through pgx: pgx, the ledger being the caller.
		"github.com/jackc/pgx/v5/pgconn.(*PgConn).ExecStatement github.com/atmost/atmost/pkg/ledger.(*Ledger).Begin": 15,
		"runtime.scanobject runtime.gcBgMarkWorker":                          8,
		"runtime.futex runtime.findRunnable runtime.schedule runtime.park_m": 12,
		// The product's own: atmost's code and River's, nothing of the parts above under them,
		// though the benchmark called it.
		"github.com/atmost/atmost/pkg/identity.parseID":                                                                4,
		"encoding/json.Marshal github.com/riverqueue/river.(*Client[...]).InsertManyFast main.(*riverStack).insert":    3,
		"crypto/sha256.Sum256 github.com/atmost/atmost/pkg/identity.Key github.com/atmost/atmost/bench/peer.newIntent": 3,
		// The benchmark's own, run as a program or as its tests, and the test kit's.
		"main.(*atmostStack).settle":                                                1,
		"github.com/atmost/atmost/bench/peer.median":                                1,
		"github.com/atmost/atmost/internal/testkit/benchtest.CPUTimes main.markCPU": 2,
		// Neither: the rest.
		"runtime.sigtramp": 6,
	})
	shares, err := partShares(prof, goParts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"NATS": 0.15, "HTTP": 0.30, "pgx": 0.15, "the collector": 0.08, "the scheduler": 0.12, "the product": 0.10, "the benchmark": 0.04, theRest: 0.06}
	sum := 0.0
	for name, share := range shares {
		sum += share
		if math.Abs(share-want[name]) > 1e-9 {
			t.Errorf("%s: %.3f of the CPU, want %.3f", name, share, want[name])
		}
	}
	if len(shares) != len(want) || math.Abs(sum-1) > 1e-9 {
		t.Errorf("shares %v (sum %v), want %v", shares, sum, want)
	}
}

func TestAProfileWithoutCPUValuesIsRefused(t *testing.T) {
	prof := stackProfile(map[string]int64{"runtime.sigtramp": 1})
	prof.SampleType[1].Type = "alloc_space"
	if _, err := partShares(prof, goParts); err == nil {
		t.Fatal("a heap profile's shares were given as CPU")
	}
}

// A run's own profile, taken and read as -parts does: a loop of this package's own is the
// benchmark's.
func TestPartsProfileTheRunItBrackets(t *testing.T) {
	prof, err := startParts(true)
	if err != nil {
		t.Fatal(err)
	}
	defer prof.abandon()
	start, _ := benchtest.CPUTimes()
	var sink uint64
	for {
		for i := range 1_000_000 {
			sink += uint64(i) * uint64(i)
		}
		if now, _ := benchtest.CPUTimes(); now-start >= 300*time.Millisecond {
			break
		}
	}
	_ = sink
	shares, err := prof.stop()
	if err != nil {
		t.Fatal(err)
	}
	if shares["the benchmark"] < 0.5 {
		t.Errorf("a loop of this package's own was %.2f of the profile as the benchmark's (%v)", shares["the benchmark"], shares)
	}
	if again, err := prof.stop(); again != nil || err != nil {
		t.Errorf("a second stop gave %v, %v", again, err)
	}
	var out bytes.Buffer
	printParts(&out, "  ", shares, 2*time.Second, 1000)
	if got := out.String(); !strings.HasPrefix(got, "  Go CPU per intent by part, ms (a CPU profile of the run): NATS 0.000, HTTP 0.000,") || !strings.Contains(got, ", the rest ") {
		t.Errorf("printed %q", got)
	}
}

// A run that fails ends its profile, so the next run can profile: Go allows one at a time.
func TestAnAbandonedProfileLetsTheNextRunProfile(t *testing.T) {
	first, err := startParts(true)
	if err != nil {
		t.Fatal(err)
	}
	first.abandon()
	next, err := startParts(true)
	if err != nil {
		t.Fatalf("after an abandoned profile: %v", err)
	}
	defer next.abandon()
	// The first run's profile is over: neither ending it again nor stopping it may end the
	// next run's.
	first.abandon()
	if shares, err := first.stop(); shares != nil || err != nil {
		t.Errorf("stop after abandon gave %v, %v", shares, err)
	}
	if err := pprof.StartCPUProfile(io.Discard); err == nil {
		pprof.StopCPUProfile()
		t.Fatal("the first run's end ended the next run's profile")
	}
	if _, err := next.stop(); err != nil {
		t.Errorf("the next run's profile: %v", err)
	}
}

func TestWithoutPartsNothingIsProfiledOrPrinted(t *testing.T) {
	prof, err := startParts(false)
	if err != nil || prof != nil {
		t.Fatalf("startParts(false) = %v, %v", prof, err)
	}
	if shares, err := prof.stop(); shares != nil || err != nil {
		t.Errorf("stop of none = %v, %v", shares, err)
	}
	var out bytes.Buffer
	printParts(&out, "  ", nil, time.Second, 1)
	if out.Len() != 0 {
		t.Errorf("printed %q without -parts", out.String())
	}
}

func TestPartsAndACPUProfileAreRefusedTogether(t *testing.T) {
	if _, err := parse([]string{"-parts", "-cpuprofile", "/tmp/x.prof"}, io.Discard); err == nil || !strings.Contains(err.Error(), "one CPU profile at a time") {
		t.Errorf("-parts with -cpuprofile: %v", err)
	}
	if o, err := parse([]string{"-parts"}, io.Discard); err != nil || !o.parts {
		t.Errorf("-parts alone: %+v, %v", o.parts, err)
	}
}
