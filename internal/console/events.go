package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

var jsonUnmarshal = json.Unmarshal

// eventLookBudget bounds the look for one intent's events on ATMOST_EVENTS: the events of its
// account from its creation on, at most this many, for at most eventLookTime.
const (
	eventLookBudget = 5000
	eventLookTime   = 2 * time.Second
)

// eventsOf lists the events of rec's transitions: each one's id and subject, and whether it is
// still in the outbox, was seen on ATMOST_EVENTS (when the console reads JetStream), or left
// the outbox.
func (s *Server) eventsOf(r *http.Request, rec ledger.Record) ([]eventRow, string, error) {
	in := rec.Intent
	pending, err := s.l.UnpublishedFor(r.Context(), []identity.DeliveryKey{in.Key})
	if err != nil {
		return nil, "", err
	}
	inOutbox := map[int64]bool{}
	for _, u := range pending {
		inOutbox[u.Seq] = true
	}
	seen, note := map[int64]uint64{}, "The console does not read ATMOST_EVENTS (no NATS server named): a transition that left the outbox was published by a relay."
	if s.cfg.JetStream != nil && len(rec.Transitions) > 0 {
		seen, note = s.lookForEvents(r.Context(), in, rec.Transitions[0].At)
	}
	out := make([]eventRow, len(rec.Transitions))
	for i, t := range rec.Transitions {
		e := eventRow{ID: events.NewID(in.Key, t.Seq), Subject: events.EventSubject(string(t.To), in.Account), Seq: t.Seq, To: t.To, Reason: t.Reason, Where: "published"}
		switch sq, ok := seen[t.Seq]; {
		case inOutbox[t.Seq]:
			e.Where = "outbox"
		case ok:
			e.Where, e.StreamSeq = "stream", sq
		}
		out[i] = e
	}
	return out, note, nil
}

// lookForEvents reads the events of in's account from since on and returns the stream
// sequence of each of in's transitions seen, by transition number.
func (s *Server) lookForEvents(ctx context.Context, in ledger.Intent, since time.Time) (map[int64]uint64, string) {
	seen := map[int64]uint64{}
	ctx, cancel := context.WithTimeout(ctx, eventLookTime)
	defer cancel()
	start := since.Add(-time.Second)
	c, err := s.cfg.JetStream.OrderedConsumer(ctx, events.EventsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"atmost.event.*." + identity.AccountToken(in.Account)},
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy, OptStartTime: &start,
	})
	if err != nil {
		return seen, "ATMOST_EVENTS could not be read: " + err.Error()
	}
	read := 0
	for read < eventLookBudget {
		batch, err := c.FetchNoWait(500)
		if err != nil {
			return seen, "ATMOST_EVENTS could not be read: " + err.Error()
		}
		n := 0
		var last *jetstream.MsgMetadata
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			last = md
			if e, err := events.Unmarshal(m.Data()); err == nil && e.DeliveryKey == in.Key {
				seen[e.Seq] = md.Sequence.Stream
			}
		}
		read += n
		if last == nil || last.NumPending == 0 {
			return seen, fmt.Sprintf("Looked on ATMOST_EVENTS at the %d events of the account since the intent was created.", read)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return seen, fmt.Sprintf("Looked on ATMOST_EVENTS at %d events of the account since the intent was created, and stopped there: later ones were not looked at.", read)
}

// liveEvents streams the new events on ATMOST_EVENTS to the overview as server-sent events,
// until the visitor leaves. Without JetStream it answers 204: the page polls instead.
func (s *Server) liveEvents(w http.ResponseWriter, r *http.Request, _ visitor) {
	if s.cfg.JetStream == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported here", http.StatusInternalServerError)
		return
	}
	// The stream lives as long as the visitor stays: the request's read and write deadlines
	// (ReadTimeout, WriteTimeout) would end it, and its context with it.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	ctx := r.Context()
	c, err := s.cfg.JetStream.OrderedConsumer(ctx, events.EventsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.EventSubjects}, DeliverPolicy: jetstream.DeliverNewPolicy,
	})
	if err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": the transitions on ATMOST_EVENTS from now on\n\n")
	flusher.Flush()
	msgs, err := c.Messages()
	if err != nil {
		return
	}
	go func() {
		<-ctx.Done()
		msgs.Stop()
	}()
	for {
		m, err := msgs.Next()
		if err != nil {
			return
		}
		e, err := events.Unmarshal(m.Data())
		if err != nil {
			continue
		}
		b, _ := json.Marshal(map[string]any{"key": e.DeliveryKey.String(), "account": e.Account, "from": e.From, "to": e.To,
			"reason": e.Reason, "actor": e.Actor, "at": e.At.UTC().Format("2006-01-02 15:04:05Z"), "id": string(e.ID)})
		if _, err := fmt.Fprintf(w, "event: transition\ndata: %s\n\n", b); err != nil {
			return
		}
		flusher.Flush()
	}
}
