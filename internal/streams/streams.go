// Package streams declares atmost's JetStream streams and creates them idempotently at start-up.
// A stream that already exists with a configuration atmost cannot rely on is an error naming
// every difference: atmost never changes an operator's stream silently.
package streams

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/atmost/atmost/pkg/events"
)

// MinServerVersion is the oldest nats-server atmost runs against: the first that takes
// `sync_interval: always` in its jetstream block (2.10.0; every 2.9 refuses the setting, so a
// server that must write each message to disk before acknowledging it cannot be older).
const MinServerVersion = "2.10.0"

// Config tunes the streams. The zero value of every field means its default.
type Config struct {
	// Replicas of every stream: 1 on a single server (DefaultReplicas), 3 in a cluster.
	Replicas int
	// DuplicateWindow is how long JetStream remembers a Nats-Msg-Id. It must exceed the relay's
	// worst-case republish delay (a crash between publish and delete, then a restart and one
	// relay interval): default DefaultDuplicateWindow, against a relay interval of seconds.
	DuplicateWindow time.Duration
	// EventsMaxAge bounds how long ATMOST_EVENTS keeps transitions. `atmost restore reconcile`
	// replays from the authorized event of the last publication the restored backup holds (its
	// witness that the replay reaches back to the backup), so it must reach back past the last
	// publication before the oldest backup a restore may use. Default DefaultEventsMaxAge.
	EventsMaxAge time.Duration
	// IntentsMaxAge bounds how long ATMOST_INTENTS keeps producers' messages after ingest
	// stored them (for replay and forensics). Default DefaultIntentsMaxAge.
	IntentsMaxAge time.Duration
}

// The defaults of the configuration's fields (the zero value of a field means its default).
const (
	DefaultReplicas        = 1
	DefaultDuplicateWindow = 10 * time.Minute
	DefaultEventsMaxAge    = 30 * 24 * time.Hour
	DefaultIntentsMaxAge   = 7 * 24 * time.Hour
)

func (c Config) withDefaults() Config {
	c.Replicas = cmp.Or(c.Replicas, DefaultReplicas)
	c.DuplicateWindow = cmp.Or(c.DuplicateWindow, DefaultDuplicateWindow)
	c.EventsMaxAge = cmp.Or(c.EventsMaxAge, DefaultEventsMaxAge)
	c.IntentsMaxAge = cmp.Or(c.IntentsMaxAge, DefaultIntentsMaxAge)
	return c
}

// Configs returns the configuration of every atmost stream.
func Configs(c Config) []jetstream.StreamConfig {
	c = c.withDefaults()
	stream := func(name, subjects string, retention jetstream.RetentionPolicy, maxAge time.Duration) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name:       name,
			Subjects:   []string{subjects},
			Retention:  retention,
			Storage:    jetstream.FileStorage,
			Replicas:   c.Replicas,
			Duplicates: c.DuplicateWindow,
			MaxAge:     maxAge,
			Discard:    jetstream.DiscardOld,
		}
	}
	return []jetstream.StreamConfig{
		stream(events.IntentsStream, events.IntentSubjects, jetstream.LimitsPolicy, c.IntentsMaxAge),
		stream(events.EventsStream, events.EventSubjects, jetstream.LimitsPolicy, c.EventsMaxAge),
		stream(events.DispatchStream, events.DispatchSubjects, jetstream.WorkQueuePolicy, 0),
		stream(events.RejectsStream, events.RejectSubjects, jetstream.LimitsPolicy, c.EventsMaxAge),
	}
}

// ErrIncompatible reports a stream that exists with a configuration atmost cannot rely on.
var ErrIncompatible = errors.New("stream exists with an incompatible configuration")

// ErrServerTooOld reports a nats-server older than MinServerVersion.
var ErrServerTooOld = errors.New("nats-server too old for atmost")

// Ensure creates the streams whose names are given (all of them when none are) or checks that
// the existing ones are compatible. Run it at start-up by the role that owns each stream.
func Ensure(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, c Config, names ...string) error {
	if err := CheckServer(nc); err != nil {
		return err
	}
	for _, want := range Configs(c) {
		if len(names) > 0 && !slices.Contains(names, want.Name) {
			continue
		}
		if _, err := js.CreateStream(ctx, want); err == nil {
			continue
		} else if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return fmt.Errorf("create stream %s: %w", want.Name, err)
		}
		stream, err := js.Stream(ctx, want.Name)
		if err != nil {
			return fmt.Errorf("look up stream %s: %w", want.Name, err)
		}
		info, err := stream.Info(ctx)
		if err != nil {
			return fmt.Errorf("look up stream %s: %w", want.Name, err)
		}
		if diffs := differences(want, info.Config); len(diffs) > 0 {
			return fmt.Errorf("%w: %s: %s (change or remove it by hand; atmost does not)", ErrIncompatible, want.Name, strings.Join(diffs, "; "))
		}
	}
	return nil
}

// differences lists what makes have unusable where atmost needs want. Limits an operator may
// raise (max age, duplicate window) only matter when they are lower than atmost needs.
func differences(want, have jetstream.StreamConfig) []string {
	var out []string
	if !slices.Equal(want.Subjects, have.Subjects) {
		out = append(out, fmt.Sprintf("subjects %v, want %v", have.Subjects, want.Subjects))
	}
	if want.Retention != have.Retention {
		out = append(out, fmt.Sprintf("retention %s, want %s", have.Retention, want.Retention))
	}
	if want.Storage != have.Storage {
		out = append(out, fmt.Sprintf("storage %s, want %s", have.Storage, want.Storage))
	}
	if want.Replicas != have.Replicas {
		out = append(out, fmt.Sprintf("%d replicas, want %d", have.Replicas, want.Replicas))
	}
	// Async persistence (nats-server 2.12 and later, one replica only) acknowledges a message
	// before it is written: a crash of the server then loses what it acknowledged.
	if have.PersistMode != jetstream.DefaultPersistMode {
		out = append(out, fmt.Sprintf("persist mode %s, want %s (acknowledged only once written)", have.PersistMode, jetstream.DefaultPersistMode))
	}
	if have.Duplicates < want.Duplicates {
		out = append(out, fmt.Sprintf("duplicate window %s, shorter than the %s atmost needs", have.Duplicates, want.Duplicates))
	}
	if want.MaxAge > 0 && have.MaxAge > 0 && have.MaxAge < want.MaxAge {
		out = append(out, fmt.Sprintf("max age %s, shorter than the %s atmost needs", have.MaxAge, want.MaxAge))
	}
	return out
}

// CheckServer refuses a nats-server older than MinServerVersion, naming both versions.
func CheckServer(nc *nats.Conn) error {
	have := nc.ConnectedServerVersion()
	if !atLeast(have, MinServerVersion) {
		return fmt.Errorf("%w: connected to nats-server %q, atmost needs %s or later (the first to take sync_interval: always)", ErrServerTooOld, have, MinServerVersion)
	}
	return nil
}

// atLeast compares dotted versions ("2.10.4", "v2.9.10-beta") numerically.
func atLeast(have, want string) bool {
	parse := func(v string) []int {
		v = strings.TrimPrefix(v, "v")
		v, _, _ = strings.Cut(v, "-")
		var out []int
		for _, part := range strings.Split(v, ".") {
			n, err := strconv.Atoi(part)
			if err != nil {
				return nil
			}
			out = append(out, n)
		}
		return out
	}
	h, w := parse(have), parse(want)
	if h == nil {
		return false
	}
	for i := range w {
		if i >= len(h) {
			return false
		}
		if h[i] != w[i] {
			return h[i] > w[i]
		}
	}
	return true
}
