package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// puller asks the durable consumer for batches over core NATS and reads the answers itself.
// jetstream's Fetch would take a producer's headers for the server's: a message with an empty
// body and a Status header is a status to it (100 is skipped and never acknowledged; 404 or 408
// ends the fetch, and the rest of the batch waits out its ack wait behind it on every
// redelivery), and a message's Nats-Pin-Id becomes its pin, after which the server refuses
// every pull request it makes. Only the server sets a delivery's reply subject, so here a
// message whose reply is an ack subject is a delivery, whatever its headers say, and anything
// else is the server's answer to the request.
//
// The answers come on one subscription, made at the first fetch and kept until close: each
// request names a reply subject of its own under it (<inbox>.<n>). A subscription per request
// cost a SUB and an UNSUB on the wire, and nats.go gives each synchronous subscription a
// channel of 65,536 messages, a 512 KiB allocation cleared on the spot: three of them per fetch
// of a light load, 4 % of the whole pipeline's CPU at 50 intents a second. The kept
// subscription is interest in every request's reply subject, so the server also delivers to a
// request that stopped waiting (its answer time passed, or deliveries it took for an earlier
// request filled its batch) until that request expires; such deliveries wait in the
// subscription for the next fetch, and close gives back what is left there when ingest stops.
type puller struct {
	nc   *nats.Conn
	next string // the consumer's MSG.NEXT subject

	// mu makes one fetch at a time: the requests share the subscription.
	mu    sync.Mutex
	inbox string // the subscription's subject is inbox + ".*"
	sub   *nats.Subscription
	n     uint64    // the last request's number
	taken time.Time // when the previous fetch returned messages: its linger counts from then
}

// ackPrefix begins the reply subject of every JetStream delivery, with or without a domain.
const ackPrefix = "$JS.ACK."

func newPuller(js jetstream.JetStream, stream, durable string) *puller {
	api := "$JS.API"
	switch opts := js.Options(); {
	case opts.Domain != "":
		api = "$JS." + opts.Domain + ".API"
	case opts.APIPrefix != "":
		api = strings.TrimSuffix(opts.APIPrefix, ".")
	}
	return &puller{nc: js.Conn(), next: api + ".CONSUMER.MSG.NEXT." + stream + "." + durable}
}

type pullRequest struct {
	Batch   int           `json:"batch"`
	Expires time.Duration `json:"expires,omitempty"` // nanoseconds
	NoWait  bool          `json:"no_wait,omitempty"`
}

// noWaitAnswer bounds the wait for the server's answer to a request that asks it not to wait.
const noWaitAnswer = 5 * time.Second

// fetch returns up to batch messages: what is waiting at once, or, when nothing is, the first
// to arrive within wait and whatever arrived with it; then, when that is less than a batch and
// the previous batch was taken less than linger ago, whatever else arrives until linger has
// passed since it. It never waits for a batch to fill: under a steady load a full batch would
// hold the first intent until batch-1 more arrived (half a second at 200 intents/s and batches
// of 100), while under a burst the batch fills by itself, because everything that arrived
// during the previous batch's commit is waiting.
//
// The linger is counted from the previous batch, not from this one's first message: a steady
// load is then taken in batches of what arrived over one linger (each batch costs the ledger
// its statements whatever its size), and no message waits more than about a linger for its
// batch, whereas a linger after the first message added itself to the time the first had
// already waited during the previous batch's commit. After a quiet spell of more than a linger
// the first message is taken at once, as a light load's batches would hold one anyway.
// Nothing (and no error) means wait passed idle.
func (p *puller) fetch(ctx context.Context, batch int, wait, linger time.Duration) ([]*nats.Msg, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out, err := p.take(ctx, batch, wait, linger)
	if len(out) > 0 {
		p.taken = time.Now()
	}
	return out, err
}

// take is fetch's work, under mu.
func (p *puller) take(ctx context.Context, batch int, wait, linger time.Duration) ([]*nats.Msg, error) {
	out, err := p.request(ctx, pullRequest{Batch: batch, NoWait: true}, noWaitAnswer)
	if err != nil {
		return out, err
	}
	idle := len(out) == 0
	if idle {
		if out, err = p.request(ctx, pullRequest{Batch: 1, Expires: wait}, wait+time.Second); err != nil || len(out) == 0 {
			return out, err
		}
	}
	if len(out) >= batch {
		return out, nil
	}
	pause := time.Until(p.taken.Add(linger))
	if pause <= 0 && !idle {
		return out, nil // everything that was waiting, and the batch's linger is over
	}
	if pause > 0 {
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return out, nil // what it has is taken; the caller stops after it
		case <-t.C:
		}
	}
	// What arrived meanwhile: during the pause, or with the first message after an idle wait
	// (a burst's rest).
	more, err := p.request(ctx, pullRequest{Batch: batch - len(out), NoWait: true}, noWaitAnswer)
	return append(out, more...), err
}

// subscribe makes the answers' subscription at the first request.
func (p *puller) subscribe() error {
	if p.sub != nil {
		return nil
	}
	inbox := p.nc.NewInbox()
	sub, err := p.nc.SubscribeSync(inbox + ".*")
	if err != nil {
		return err
	}
	p.inbox, p.sub = inbox, sub
	return nil
}

// request sends one pull request and returns the deliveries that answer it, until the server
// says it has no more for it (or the request expired) or answer passed. A delivery comes with
// its stream subject, not the request's reply subject, so one that answers an earlier request
// (one that stopped waiting before the server was done with it) is taken too: the server holds
// it as delivered, and left in the subscription it would come back only after the consumer's
// ack wait. A status names its request's reply subject; an earlier request's is of no concern
// to this one.
func (p *puller) request(ctx context.Context, r pullRequest, answer time.Duration) ([]*nats.Msg, error) {
	if err := p.subscribe(); err != nil {
		return nil, err
	}
	req, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	p.n++
	reply := p.inbox + "." + strconv.FormatUint(p.n, 10)
	if err := p.nc.PublishRequest(p.next, reply, req); err != nil {
		return nil, err
	}
	// The server answers an expired request with 408 at its expiry; answer leaves time for its
	// way, and ends the wait for one that no server answers.
	waiting, cancel := context.WithTimeout(ctx, answer)
	defer cancel()
	var out []*nats.Msg
	for len(out) < r.Batch {
		msg, err := p.sub.NextMsgWithContext(waiting)
		switch {
		case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			return out, nil
		case err != nil:
			return out, err
		case strings.HasPrefix(msg.Reply, ackPrefix):
			out = append(out, msg)
			continue
		case msg.Subject != reply:
			continue // an earlier request's status
		}
		switch status := msg.Header.Get("Status"); status {
		case "404", "408": // nothing (more) to deliver, or the request expired
			return out, nil
		case "100": // a heartbeat
		default:
			return out, fmt.Errorf("pull request answered %s %s", status, msg.Header.Get("Description"))
		}
	}
	return out, nil
}

// close ends the answers' subscription, so that the server stops delivering to requests that
// stopped waiting, and asks the server to deliver again at once what the subscription holds
// undelivered: left there, it would wait out the consumer's ack wait before another ingester
// got it. The subscription is drained (nats.go flushes the UNSUB and keeps what came before
// it), not unsubscribed, which would drop what it holds.
func (p *puller) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sub == nil {
		return nil
	}
	sub := p.sub
	p.sub = nil
	if err := sub.Drain(); err != nil {
		return err
	}
	var err error
	for {
		msg, nextErr := sub.NextMsg(closeWait)
		if nextErr != nil {
			return err // drained (the subscription is gone), or the connection with it
		}
		if strings.HasPrefix(msg.Reply, ackPrefix) {
			err = errors.Join(err, p.nak(msg, 0))
		}
	}
}

// closeWait bounds close's wait for what the server sent before the UNSUB.
const closeWait = 2 * time.Second

// ack acknowledges a delivery.
func (p *puller) ack(msg *nats.Msg) error { return p.nc.Publish(msg.Reply, []byte("+ACK")) }

// nak asks the server to deliver the message again after delay.
func (p *puller) nak(msg *nats.Msg, delay time.Duration) error {
	return p.nc.Publish(msg.Reply, fmt.Appendf(nil, `-NAK {"delay": %d}`, delay.Nanoseconds()))
}
