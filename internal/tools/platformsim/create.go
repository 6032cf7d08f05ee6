package platformsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"go.uber.org/zap"
)

// maxBody bounds a create request's body and a plan.
const maxBody = 1 << 20

// createBody is the part of a create body the platform keeps. Any other field is accepted and
// ignored.
type createBody struct {
	Text   json.RawMessage `json:"text"`
	Target json.RawMessage `json:"target"`
}

// handleCreate is POST /v1/accounts/{account}/{action}. The order of its steps is the fault
// model: the fault is drawn on arrival, a dropped connection before the body is read or after
// it creates nothing, a refusal creates nothing, and from the commit on the object exists
// whatever the client hears.
func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	account, action := r.PathValue("account"), r.PathValue("action")
	key := r.Header.Get("Idempotency-Key")

	s.mu.Lock()
	s.requests++
	if key == "" || !validAction(action) {
		s.mu.Unlock()
		if key == "" {
			writeError(w, http.StatusBadRequest, "missing Idempotency-Key header")
		} else {
			writeError(w, http.StatusBadRequest, "action must match [a-z][a-z0-9_]{0,31}")
		}
		return
	}
	s.received[key]++
	s.inflight[key]++
	fault := s.plan.draw()
	s.faults[fault]++
	plan := s.plan.plan // read-only from here: the drawer never changes its plan
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.inflight[key]--; s.inflight[key] == 0 {
			delete(s.inflight, key)
		}
		s.mu.Unlock()
	}()
	if fault != FaultOK {
		s.log.Info("fault injected", zap.String("fault", string(fault)), zap.String("delivery_key", key),
			zap.String("account", account), zap.String("action", action))
	}

	if fault == FaultDropBeforeRead {
		drop(w)
		return
	}
	body, err := readBody(w, r)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, "body larger than 1 MiB")
			return
		}
		writeError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	switch fault {
	case FaultDropAfterRead:
		drop(w)
		return
	case FaultRateLimited:
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "rate limited")
		return
	case FaultReject:
		writeError(w, plan.definitiveStatus(), "rejected")
		return
	}
	text, target, ok := parseCreateBody(body)
	if !ok {
		writeError(w, http.StatusBadRequest, "the body must be a JSON object")
		return
	}

	wait := s.cfg.Latency
	if fault == FaultDelay {
		wait += plan.delay()
	}
	if wait > 0 {
		// Not cut short when the client goes: a real platform commits what it received.
		time.Sleep(wait)
	}
	obj, created := s.commit(account, action, key, text, target)

	switch fault {
	case FaultDropAfterCommit:
		drop(w)
	case FaultErrorAfterCommit:
		writeError(w, http.StatusInternalServerError, "internal error")
	default:
		status := http.StatusCreated
		if !created {
			status = http.StatusOK
		}
		writeJSON(w, status, obj)
	}
}

// parseCreateBody checks that body is one JSON object and returns its "text" and "target"
// fields when they are strings.
func parseCreateBody(body []byte) (text, target string, ok bool) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return "", "", false
	}
	var b createBody
	if err := json.Unmarshal(body, &b); err != nil {
		return "", "", false
	}
	return jsonString(b.Text), jsonString(b.Target), true
}

func jsonString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// validAction is the intent envelope's rule for actions: [a-z][a-z0-9_]{0,31}.
func validAction(a string) bool {
	if len(a) == 0 || len(a) > 32 || a[0] < 'a' || a[0] > 'z' {
		return false
	}
	for i := 1; i < len(a); i++ {
		c := a[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// readBody reads the whole body, up to maxBody, into one buffer sized by Content-Length.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	size := 512
	if r.ContentLength >= 0 && r.ContentLength < maxBody {
		size = int(r.ContentLength) + 1 // +1: room to read the EOF without growing
	}
	body := http.MaxBytesReader(w, r.Body, maxBody)
	buf := make([]byte, 0, size)
	for {
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
}

// drop closes the request's connection without an answer: the client sees the connection die,
// not an HTTP error.
func drop(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler) // the server closes the connection and logs nothing
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}
