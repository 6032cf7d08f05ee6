package webhook_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/webhook"
)

// secret is a credential that cannot occur by chance in anything else the tests look at.
const secret = "sk-live-7f3c9e21-NEVER-IN-EVIDENCE"

const secretEnv = "ATMOST_WEBHOOK_TEST_TOKEN"

func deliveryKey(t testing.TB) identity.DeliveryKey {
	t.Helper()
	k, err := identity.ParseDeliveryKey("dk1:" + strings.Repeat("ab", 32))
	require.NoError(t, err)
	return k
}

func request(t testing.TB) platform.Request {
	return platform.Request{Key: deliveryKey(t), Account: "acct-1", Action: "post", Target: "feed/7",
		Request: json.RawMessage(`{"text":"hello"}`), Text: "hello"}
}

// open opens the adapter for acct-1 with settings, and the credential reference ref.
func open(t testing.TB, settings, ref string) platform.Adapter {
	t.Helper()
	ad, err := webhook.Open(platform.Account{ID: "acct-1", Platform: webhook.Name, Settings: json.RawMessage(settings), CredentialRef: ref})
	require.NoError(t, err)
	return ad
}

// seen is one request an endpoint received.
type seen struct {
	Method, Path, RawPath string
	Header                http.Header
	Body                  []byte
}

// endpoint is an httptest server that records what it receives and answers with the handler
// registered for the path (default: 201 {"id":"obj-1"}).
type endpoint struct {
	*httptest.Server
	mu     sync.Mutex
	got    []seen
	answer map[string]func(w http.ResponseWriter, r *http.Request)
}

func newEndpoint(t *testing.T) *endpoint {
	e := &endpoint{answer: map[string]func(http.ResponseWriter, *http.Request){}}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.got = append(e.got, seen{Method: r.Method, Path: r.URL.Path, RawPath: r.URL.EscapedPath(), Header: r.Header.Clone(), Body: body})
		h := e.answer[r.URL.Path]
		e.mu.Unlock()
		if h == nil {
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id":"obj-1"}`)
			return
		}
		h(w, r)
	}))
	t.Cleanup(e.Close)
	return e
}

// on answers requests to path with status and body.
func (e *endpoint) on(path string, status int, body string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.answer[path] = func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func (e *endpoint) requests() []seen {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]seen(nil), e.got...)
}
