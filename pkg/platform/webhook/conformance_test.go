package webhook_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/platformtest"
)

// The webhook adapter meets the adapter contract against an endpoint that offers everything a
// webhook can use (a credential, a read-back and an idempotency-status endpoint), and against
// one that offers only the send.
func TestConformance(t *testing.T) {
	t.Run("endpoint with read-back and status", func(t *testing.T) {
		platformtest.Run(t, platformtest.Harness{Open: func(t *testing.T) (platform.Adapter, platformtest.Platform) {
			h := newHookPlatform(t, true)
			t.Setenv(secretEnv, secret)
			return open(t, fmt.Sprintf(`{"url":%q,"credential_header":"Authorization","credential_prefix":"Bearer ",
				"body_template":{"key":"$key","text":"$text"},"readback_url":%q,"status_url":%q}`,
				h.URL+"/hook", h.URL+"/objects/{id}", h.URL+"/status/{key}"), "env:"+secretEnv), h
		}, Request: hookRequest})
	})
	t.Run("endpoint with the send only", func(t *testing.T) {
		platformtest.Run(t, platformtest.Harness{Open: func(t *testing.T) (platform.Adapter, platformtest.Platform) {
			h := newHookPlatform(t, false)
			return open(t, fmt.Sprintf(`{"url":%q,"confirm":"response"}`, h.URL+"/hook"), ""), h
		}, Request: hookRequest})
	})
}

func hookRequest(t *testing.T, text string) platform.Request {
	return platformtest.Post(t, "acct-1", text)
}

// hookPlatform is an endpoint that keeps what it receives: objects by id, the requests
// received per Idempotency-Key, an idempotency-status endpoint that answers for the key
// (404 only for a key never received), and the answers the suite steers.
type hookPlatform struct {
	*httptest.Server
	credential bool // every request must carry "Bearer " + secret

	mu       sync.Mutex
	next     platformtest.Answer
	creates  [][]byte
	requests int
	seq      int
	text     map[string]string   // object id -> text
	deleted  map[string]bool     // object ids
	byKey    map[string][]string // Idempotency-Key -> object ids, deleted ones included
	received map[string]bool     // Idempotency-Keys of the create requests received
}

func newHookPlatform(t *testing.T, credential bool) *hookPlatform {
	h := &hookPlatform{credential: credential, text: map[string]string{}, deleted: map[string]bool{},
		byKey: map[string][]string{}, received: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hook", h.create)
	mux.HandleFunc("POST /elsewhere", h.create) // a redirect's target: a create like any other
	mux.HandleFunc("GET /objects/{id}", h.object)
	mux.HandleFunc("GET /status/{key}", h.status)
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.requests++
		h.mu.Unlock()
		if h.credential && r.Header.Get("Authorization") != "Bearer "+secret {
			answer(w, http.StatusUnauthorized, `{"error":"no credential"}`)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(h.Close)
	return h
}

func answer(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func hangUp(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

func (h *hookPlatform) create(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	h.mu.Lock()
	a := h.next
	h.next = platformtest.Accept
	h.received[key] = true
	i := len(h.creates)
	h.creates = append(h.creates, nil)
	h.mu.Unlock()

	switch a {
	case platformtest.DropBeforeRead:
		hangUp(w)
		return
	case platformtest.Redirect:
		w.Header().Set("Location", "/elsewhere")
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	}
	body, err := io.ReadAll(r.Body)
	h.mu.Lock()
	h.creates[i] = body
	h.mu.Unlock()
	if err != nil {
		answer(w, http.StatusBadRequest, `{"error":"unreadable body"}`)
		return
	}
	switch a {
	case platformtest.RateLimit:
		w.Header().Set("Retry-After", "1")
		answer(w, http.StatusTooManyRequests, `{"error":"slow down"}`)
		return
	case platformtest.Refuse:
		answer(w, http.StatusUnprocessableEntity, `{"error":"invalid"}`)
		return
	case platformtest.RefuseUndeclared:
		answer(w, http.StatusConflict, `{"error":"a request with this key is being processed"}`)
		return
	case platformtest.Slow:
		time.Sleep(platformtest.SlowBy)
	}
	id := h.commit(key, body)
	switch a {
	case platformtest.DropAfterCommit:
		hangUp(w)
	case platformtest.ErrorAfterCommit:
		answer(w, http.StatusInternalServerError, `{"error":"internal"}`)
	case platformtest.SuccessWithoutID:
		answer(w, http.StatusCreated, `{"ok":true}`)
	default:
		answer(w, http.StatusCreated, `{"id":`+strconv.Quote(id)+`}`)
	}
}

// commit stores the object the body describes: its text is the body's "text", or the request
// object's (the default template).
func (h *hookPlatform) commit(key string, body []byte) string {
	var b struct {
		Text    string `json:"text"`
		Request struct {
			Text string `json:"text"`
		} `json:"request"`
	}
	_ = json.Unmarshal(body, &b)
	text := b.Text
	if text == "" {
		text = b.Request.Text
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	id := "hook-obj-" + strconv.Itoa(h.seq)
	h.text[id] = text
	h.byKey[key] = append(h.byKey[key], id)
	return id
}

func (h *hookPlatform) object(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	h.mu.Lock()
	text, ok := h.text[id]
	ok = ok && !h.deleted[id]
	h.mu.Unlock()
	if !ok {
		answer(w, http.StatusNotFound, `{"error":"no such object"}`)
		return
	}
	b, _ := json.Marshal(map[string]string{"id": id, "text": text})
	answer(w, http.StatusOK, string(b))
}

// status answers for the key, whatever became of its objects since: 2xx with the first object
// it created, 404 when no request with it was ever received, 409 when one was and created
// nothing.
func (h *hookPlatform) status(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	h.mu.Lock()
	ids, received := h.byKey[key], h.received[key]
	h.mu.Unlock()
	switch {
	case len(ids) > 0:
		answer(w, http.StatusOK, `{"id":`+strconv.Quote(ids[0])+`}`)
	case received:
		answer(w, http.StatusConflict, `{"state":"received, nothing created"}`)
	default:
		answer(w, http.StatusNotFound, `{"error":"no request with this key was received"}`)
	}
}

func (h *hookPlatform) Next(a platformtest.Answer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next = a
}

func (h *hookPlatform) Creates() [][]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][]byte(nil), h.creates...)
}

func (h *hookPlatform) Requests() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.requests
}

func (h *hookPlatform) Objects(r platform.Request) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.byKey[r.Key.String()]...)
}

func (h *hookPlatform) Edit(id, text string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.text[id] = text
}

func (h *hookPlatform) Delete(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.deleted[id] = true
}

func (h *hookPlatform) Down() { h.Close() }

func (h *hookPlatform) Secrets() []string { return []string{secret} }

var _ platformtest.Platform = (*hookPlatform)(nil)
