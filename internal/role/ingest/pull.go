package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
type puller struct {
	nc   *nats.Conn
	next string // the consumer's MSG.NEXT subject
}

// ackPrefix begins the reply subject of every JetStream delivery, with or without a domain.
const ackPrefix = "$JS.ACK."

// ackTimeout bounds the wait for the server's confirmation of one acknowledgement.
const ackTimeout = 5 * time.Second

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
	Expires time.Duration `json:"expires"` // nanoseconds
}

// fetch asks for up to batch messages and returns what came within wait: a full batch, or
// what there was when the server said the request expired.
func (p *puller) fetch(ctx context.Context, batch int, wait time.Duration) ([]*nats.Msg, error) {
	inbox := p.nc.NewInbox()
	sub, err := p.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	req, err := json.Marshal(pullRequest{Batch: batch, Expires: wait})
	if err != nil {
		return nil, err
	}
	if err := p.nc.PublishRequest(p.next, inbox, req); err != nil {
		return nil, err
	}
	// The server answers an expired request with 408 at wait; the second more is for its way.
	waiting, cancel := context.WithTimeout(ctx, wait+time.Second)
	defer cancel()
	var out []*nats.Msg
	for len(out) < batch {
		msg, err := sub.NextMsgWithContext(waiting)
		switch {
		case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			return out, nil
		case err != nil:
			return out, err
		case strings.HasPrefix(msg.Reply, ackPrefix):
			out = append(out, msg)
			continue
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

// ack acknowledges a delivery and waits for the server to confirm it.
func (p *puller) ack(ctx context.Context, msg *nats.Msg) error {
	ctx, cancel := context.WithTimeout(ctx, ackTimeout)
	defer cancel()
	_, err := p.nc.RequestWithContext(ctx, msg.Reply, []byte("+ACK"))
	return err
}

// nak asks the server to deliver the message again after delay.
func (p *puller) nak(msg *nats.Msg, delay time.Duration) error {
	return p.nc.Publish(msg.Reply, fmt.Appendf(nil, `-NAK {"delay": %d}`, delay.Nanoseconds()))
}
