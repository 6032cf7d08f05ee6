package main

import (
	"io"
	"slices"
	"testing"
	"time"

	"github.com/atmost/atmost/internal/tools/platformsim"
)

// These tests need no database: `make test` runs them, and building them keeps this module
// compiling against the atmost it replaces. The benchmark itself is `make bench-peer`.

func TestQuantilesAreNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 1000; i >= 1; i-- { // unsorted on purpose: summarize sorts a copy
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	s := summarize(ds)
	for _, c := range []struct {
		name      string
		got, want time.Duration
	}{
		{"p50", s.p50, 500 * time.Millisecond},
		{"p99", s.p99, 990 * time.Millisecond},
		{"p99.9", s.p999, 999 * time.Millisecond},
		{"max", s.maxLat, 1000 * time.Millisecond},
	} {
		if c.got != c.want {
			t.Errorf("%s of 1..1000 ms: %s, want %s", c.name, c.got, c.want)
		}
	}
	if ds[0] != 1000*time.Millisecond {
		t.Errorf("summarize sorted its caller's slice")
	}
	if one := summarize([]time.Duration{7}); one.p50 != 7 || one.p999 != 7 || one.n != 1 {
		t.Errorf("one sample: %+v", one)
	}
	if none := summarize(nil); none != (summary{}) {
		t.Errorf("no sample: %+v", none)
	}
}

func TestDuplicatesCountKeysAndExtraObjects(t *testing.T) {
	keys, extra := duplicates(platformsim.Counts{Created: map[string]int{"a": 1, "b": 2, "c": 3, "d": 1}})
	if keys != 2 || extra != 3 {
		t.Errorf("duplicates: %d keys, %d extra objects; want 2 and 3", keys, extra)
	}
}

func TestMedian(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median of 3, 1, 2: %v", m)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median of 4, 1, 3, 2: %v", m)
	}
}

func TestThousands(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 20000: "20,000", 1234567.4: "1,234,567", -4200: "-4,200"} {
		if got := thousands(in); got != want {
			t.Errorf("thousands(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestParseRefusesWhatCannotRun(t *testing.T) {
	for _, args := range [][]string{
		{"-mode", "soak"}, {"-sides", "atmost,kafka"}, {"-faults", "1.5"}, {"-rates", "0"}, {"-rates", "half,200,half"}, {"-rates", "twice"},
		{"-latencies", "fast"}, {"-isolation", "snapshot"}, {"-river-fetch-cooldown", "0s"}, {"-rounds", "0"}, {"extra"},
	} {
		if _, err := parse(args, io.Discard); err == nil {
			t.Errorf("parse(%q) accepted it", args)
		}
	}
	o, err := parse([]string{"-mode", "steady", "-rates", "200, 1000", "-latencies", "0,50ms"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.rates) != 2 || o.rates[1] != 1000 || len(o.latencies) != 2 || o.latencies[1] != 50*time.Millisecond {
		t.Errorf("steady options: rates %v, latencies %v", o.rates, o.latencies)
	}
	if o.intents != 20000 || len(o.sides) != 2 || o.sides[0] != "atmost" {
		t.Errorf("defaults: %d intents, sides %v", o.intents, o.sides)
	}
	if o, err = parse([]string{"-mode", "steady"}, io.Discard); err != nil || !slices.Equal(o.rates, []float64{200, 1000, 0}) {
		t.Errorf("default steady rates: %v (%v)", o.rates, err)
	}
	if o, err = parse([]string{"-mode", "steady", "-rates", " half"}, io.Discard); err != nil || !slices.Equal(o.rates, []float64{0}) {
		t.Errorf("-rates ' half': %v (%v)", o.rates, err)
	}
}

func TestHalfTakesItsPlaceInTheRates(t *testing.T) {
	rates := []float64{200, 0, 1000}
	if got := withHalf(rates, 3417); !slices.Equal(got, []float64{200, 1709, 1000}) || rates[1] != 0 {
		t.Errorf("withHalf(%v, 3417) = %v", rates, got)
	}
	if got := withHalf([]float64{0}, 0.5); !slices.Equal(got, []float64{1}) {
		t.Errorf("half of a maximum under one a second: %v, want at least 1", got)
	}
}

func TestIntentsAreTheSameOnBothSides(t *testing.T) {
	a, err := newIntent("peer", 7)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := newIntent("peer", 7)
	c, _ := newIntent("peer", 8)
	if a.key != b.key || a.key == c.key || a.text != "peer 7" {
		t.Errorf("intent 7 twice: %s and %s; intent 8: %s; text %q", a.key, b.key, c.key, a.text)
	}
}
