package transport_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/transport"
)

// answerFirstCloseSecond answers the first request of each connection with keep-alive, and
// meets the second by reading it whole and closing the socket without a byte of answer: the
// platform received the request and may have acted on it.
func answerFirstCloseSecond(n int) rawAction {
	if n == 1 {
		return answer
	}
	return closeConn
}

func keyHeader(key string) http.Header {
	return http.Header{"Idempotency-Key": {key}, "Content-Type": {"application/json"}}
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The connection dies after the platform read the whole request: net/http would send the
// request again on a fresh connection (it carries an Idempotency-Key and a rewindable body),
// and the platform would act twice. The transport sends it once and reports an unknown outcome.
func TestAReusedConnectionClosedByTheServerIsNotReplayed(t *testing.T) {
	srv := newRawServer(t, answerFirstCloseSecond)
	c := transport.New(transport.Config{})
	t.Cleanup(c.CloseIdle)
	ctx := testContext(t)

	first := c.Do(ctx, http.MethodPost, srv.URL(), keyHeader("dk1:first"), []byte(`{"n":1}`))
	require.NoError(t, first.Err)
	require.Equal(t, http.StatusCreated, first.Status)
	require.False(t, first.Reused)

	second := c.Do(ctx, http.MethodPost, srv.URL(), keyHeader("dk1:second"), []byte(`{"n":2}`))
	require.EqualValues(t, 2, srv.Requests(), "one request per Do: the second was not replayed")
	require.EqualValues(t, 1, srv.Conns(), "no second connection was opened to replay it")
	require.EqualValues(t, 2, c.Requests())
	require.Error(t, second.Err)
	require.True(t, second.Reused, "the second request must ride the first one's connection")
	require.True(t, second.Connected())
	require.Zero(t, second.Status)
	got := srv.Got()
	require.Equal(t, "dk1:second", got[1].Header["idempotency-key"])
	require.Equal(t, `{"n":2}`, string(got[1].Body), "the platform received the whole request")

	out := transport.Classify(second, transport.DefaultDefinitive(), idAt)
	require.Equal(t, platform.Unknown, out.Result)
	require.Equal(t, platform.ReasonSendUnknown, out.Reason)
	require.Equal(t, string(transport.CaseErrorAfterConn), out.Detail["case"])
	require.Equal(t, true, out.Detail["reused_connection"])
}

// The hazard the test above guards against, shown with net/http used the natural way against
// the same server: http.NewRequest sets GetBody for a *bytes.Reader, the Idempotency-Key header
// makes the POST look idempotent, and net/http replays it on a new connection. The server
// counts 3 requests for 2 calls, which is what the test above would see if the transport let
// net/http replay (the mutation list removes the line that prevents it).
func TestNetHTTPReplaysAPostCarryingAnIdempotencyKey(t *testing.T) {
	send := func(t *testing.T, withKey bool) (*rawServer, []error) {
		srv := newRawServer(t, answerFirstCloseSecond)
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		client := &http.Client{Transport: tr}
		var errs []error
		for i, body := range []string{`{"n":1}`, `{"n":2}`} {
			req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, srv.URL(), bytes.NewReader([]byte(body)))
			require.NoError(t, err)
			require.NotNil(t, req.GetBody, "http.NewRequest makes a *bytes.Reader body rewindable")
			if withKey {
				req.Header.Set("Idempotency-Key", []string{"dk1:first", "dk1:second"}[i])
			}
			resp, err := client.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			errs = append(errs, err)
		}
		return srv, errs
	}

	t.Run("with an Idempotency-Key the POST is replayed", func(t *testing.T) {
		srv, errs := send(t, true)
		require.NoError(t, errs[0])
		require.NoError(t, errs[1], "net/http hid the lost connection by sending again")
		require.EqualValues(t, 3, srv.Requests(), "2 calls, 3 requests: the platform saw the second one twice")
		got := srv.Got()
		require.Equal(t, got[1].Header["idempotency-key"], got[2].Header["idempotency-key"])
		require.Equal(t, got[1].Body, got[2].Body)
	})
	t.Run("without one it is not", func(t *testing.T) {
		srv, errs := send(t, false)
		require.NoError(t, errs[0])
		require.Error(t, errs[1])
		require.EqualValues(t, 2, srv.Requests())
	})
}
