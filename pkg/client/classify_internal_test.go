package client

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
)

// Every ending of a publish is "nothing stored" only when it proves it; the rest, including
// the answers a test server cannot be made to give (a cluster's duplicate in process, an
// error without a code, an answer that does not parse), is "may have been published".
func TestOnlyAProvenRefusalIsNothingStored(t *testing.T) {
	t.Parallel()
	env, err := identity.NewEnvelope("acct-1", "post", "", []byte(`{"text":"x"}`), "", nil)
	require.NoError(t, err)
	key := env.DeliveryKey()
	api := func(code int, errCode jetstream.ErrorCode) error {
		return &jetstream.APIError{Code: code, ErrorCode: errCode, Description: fmt.Sprint("code ", code)}
	}
	for _, c := range []struct {
		name     string
		err      error
		unstored bool
	}{
		{"400 message too large", api(400, jetstream.JSErrCodeStreamMessageExceedsMaximum), true},
		{"400 sealed stream", api(400, 10109), true},
		{"400 account limits", api(400, 10002), true},
		{"499", api(499, 0), true},
		{"409 duplicate message id in process", api(409, errCodeDuplicateInProcess), false},
		{"500", api(500, 0), false},
		{"503 store failed", api(503, 10077), false},
		{"503 insufficient resources", api(503, 10023), false},
		{"no code", api(0, 0), false},
		{"399", api(399, 0), false},
		{"no stream", jetstream.ErrNoStreamResponse, true},
		{"ack timeout", jetstream.ErrAsyncPublishTimeout, false},
		{"unparsable ack", jetstream.ErrInvalidJSAck, false},
		{"disconnected", nats.ErrDisconnected, false},
		{"something else", errors.New("boom"), false},
	} {
		err := publishError(key, "atmost.intent.acct-1", c.err)
		require.Equal(t, !c.unstored, errors.Is(err, ErrMaybePublished), "%s: %v", c.name, err)
		require.ErrorIs(t, err, c.err, c.name)
	}
	for _, c := range []struct {
		name   string
		err    error
		unsent bool
	}{
		{"closed", nats.ErrConnectionClosed, true},
		{"draining", nats.ErrConnectionDraining, true},
		{"invalid connection", nats.ErrInvalidConnection, true},
		{"too large for the server", nats.ErrMaxPayload, true},
		{"bad subject", nats.ErrBadSubject, true},
		{"no headers", nats.ErrHeadersNotSupported, true},
		{"reconnect buffer full", nats.ErrReconnectBufExceeded, true},
		{"stalled", jetstream.ErrTooManyStalledMsgs, true},
		{"reply set", jetstream.ErrAsyncPublishReplySubjectSet, true},
		{"write failed", errors.New("write tcp: connection reset by peer"), false},
		{"write deadline", context.DeadlineExceeded, false},
	} {
		err := sendError(key, c.err)
		require.Equal(t, !c.unsent, errors.Is(err, ErrMaybePublished), "%s: %v", c.name, err)
		require.ErrorIs(t, err, c.err, c.name)
	}
}
