package platformsim

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Object is one created object, as the platform stores it.
type Object struct {
	ID      string `json:"id"`
	Account string `json:"account"`
	Action  string `json:"action"`
	// Key is the Idempotency-Key of the create request that made the object.
	Key string `json:"key"`
	// Text is the body's "text" field when it is a string, else "".
	Text string `json:"text"`
	// Target is the body's "target" field when it is a string, else "".
	Target    string    `json:"target"`
	CreatedAt time.Time `json:"created_at"`
}

// record is an object with the monotonic time of its creation, which ListLag is measured
// against.
type record struct {
	Object
	born time.Time
}

// Server is the simulated platform. It is safe for concurrent use; all of its state sits
// behind one mutex that no request holds while it sleeps or does I/O.
type Server struct {
	cfg      Config
	log      *zap.Logger
	idPrefix string
	mux      *http.ServeMux

	mu        sync.Mutex
	seq       uint64
	objects   map[string]*record   // by id
	byKey     map[string][]*record // by Idempotency-Key, in creation order
	byAccount map[string][]*record // in creation order
	received  map[string]int       // create requests per key, whatever became of them
	lookups   map[string]int       // lookups by key (a listing filtered by key, a status lookup)
	inflight  map[string]int       // create requests per key being handled right now
	faults    map[Fault]int
	requests  int
	reads     int      // grouped reads served (GET /v1/objects)
	overOne   []string // keys with more than one object, in the order they got there
	maxPerKey int
	plan      *drawer
}

// New returns a simulator. It fails with ErrInvalidConfig when cfg does not validate.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	// Object ids carry a per-process prefix, so that an id a client kept from an earlier run of
	// the simulator never names an object of this one.
	var b [3]byte
	_, _ = rand.Read(b[:])
	s := &Server{
		cfg:       cfg,
		log:       log.Named("platformsim"),
		idPrefix:  "obj_" + hex.EncodeToString(b[:]) + "_",
		objects:   map[string]*record{},
		byKey:     map[string][]*record{},
		byAccount: map[string][]*record{},
		received:  map[string]int{},
		lookups:   map[string]int{},
		inflight:  map[string]int{},
		faults:    map[Fault]int{},
		plan:      newDrawer(cfg.Plan),
	}
	s.cfg.Plan = Plan{} // the drawer holds the live plan
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/accounts/{account}/{action}", s.handleCreate)
	mux.HandleFunc("GET /v1/objects/{id}", s.handleObject)
	mux.HandleFunc("GET /v1/objects", s.handleObjects)
	mux.HandleFunc("GET /v1/accounts/{account}/objects", s.handleList)
	mux.HandleFunc("GET /v1/idempotency/{key}", s.handleStatus)
	mux.HandleFunc("GET /v1/counts", s.handleCounts)
	mux.HandleFunc("GET /v1/plan", s.handleGetPlan)
	mux.HandleFunc("PUT /v1/plan", s.handlePutPlan)
	s.mux = mux
	return s, nil
}

// Handler returns the simulator's HTTP API. Serve it over a real listener (Serve, or
// httptest.NewServer): the connection-dropping faults need an http.Hijacker.
func (s *Server) Handler() http.Handler { return s.mux }

// Plan returns a copy of the fault plan in force.
func (s *Server) Plan() Plan {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.plan.plan.clone()
}

// SetPlan replaces the fault plan: the new script starts at its first entry and the generator
// restarts from the new seed. It fails with ErrInvalidPlan, keeping the old plan, when p does
// not validate.
func (s *Server) SetPlan(p Plan) error {
	if err := p.validate(); err != nil {
		return err
	}
	d := newDrawer(p)
	s.mu.Lock()
	s.plan = d
	s.mu.Unlock()
	s.log.Info("fault plan replaced", zap.Int64("seed", p.Seed), zap.Int("script", len(p.Script)), zap.Any("rates", p.Rates))
	return nil
}

// Counts is the platform's tally: the numbers a test checks the at-most-once invariant with.
type Counts struct {
	// Created is the number of objects created per Idempotency-Key.
	Created map[string]int `json:"created"`
	// Received is the number of create requests that reached the handler per key, whatever
	// became of them (dropped, refused, committed).
	Received map[string]int `json:"received"`
	// Lookups is the number of lookups per key: listings filtered by the key and
	// idempotency-status lookups. atmost's reconciler makes at most one per indeterminate
	// intent.
	Lookups map[string]int `json:"lookups"`
	// Faults is the number of create requests that met each fault (FaultOK included).
	Faults map[Fault]int `json:"faults"`
	// Objects is the total number of objects created.
	Objects int `json:"objects"`
	// Requests is the total number of create requests received, malformed ones included.
	Requests int `json:"requests"`
	// GroupedReads is how many grouped reads (GET /v1/objects?id=...) were answered.
	GroupedReads int `json:"grouped_reads"`
	// MaxCreatedPerKey is the largest value in Created: above 1 means a double send.
	MaxCreatedPerKey int `json:"max_created_per_key"`
	// KeysOverOne lists the keys with more than one object, in the order they got there.
	KeysOverOne []string `json:"keys_over_one"`
}

// Counts returns a snapshot of the tally.
func (s *Server) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := Counts{
		Created:          make(map[string]int, len(s.byKey)),
		Received:         make(map[string]int, len(s.received)),
		Lookups:          make(map[string]int, len(s.lookups)),
		Faults:           make(map[Fault]int, len(s.faults)),
		Objects:          len(s.objects),
		Requests:         s.requests,
		GroupedReads:     s.reads,
		MaxCreatedPerKey: s.maxPerKey,
		KeysOverOne:      append([]string{}, s.overOne...),
	}
	for k, objs := range s.byKey {
		c.Created[k] = len(objs)
	}
	for k, n := range s.received {
		c.Received[k] = n
	}
	for k, n := range s.lookups {
		c.Lookups[k] = n
	}
	for f, n := range s.faults {
		c.Faults[f] = n
	}
	return c
}

// Created returns how many objects the create requests keyed key created.
func (s *Server) Created(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byKey[key])
}

// ObjectCount returns how many objects the platform holds: what Counts().Objects says,
// without copying every count.
func (s *Server) ObjectCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.objects)
}

// Received returns how many create requests keyed key reached the handler.
func (s *Server) Received(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.received[key]
}

// Lookups returns how many lookups by key were made: listings filtered by the key and
// idempotency-status lookups.
func (s *Server) Lookups(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookups[key]
}

// Objects returns the objects the create requests keyed key created, oldest first.
func (s *Server) Objects(key string) []Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Object, 0, len(s.byKey[key]))
	for _, r := range s.byKey[key] {
		out = append(out, r.Object)
	}
	return out
}

// Object returns the object named id.
func (s *Server) Object(id string) (Object, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.objects[id]
	if !ok {
		return Object{}, false
	}
	return r.Object, true
}

// commit creates the object, or with Dedupe returns the one key already created (created
// false).
func (s *Server) commit(account, action, key, text, target string) (o Object, created bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.Dedupe {
		if prior := s.byKey[key]; len(prior) > 0 {
			return prior[0].Object, false
		}
	}
	s.seq++
	now := time.Now()
	r := &record{
		Object: Object{ID: s.idPrefix + strconv.FormatUint(s.seq, 10), Account: account, Action: action,
			Key: key, Text: text, Target: target, CreatedAt: now.UTC()},
		born: now,
	}
	s.objects[r.ID] = r
	s.byKey[key] = append(s.byKey[key], r)
	s.byAccount[account] = append(s.byAccount[account], r)
	n := len(s.byKey[key])
	if n == 2 {
		s.overOne = append(s.overOne, key)
	}
	s.maxPerKey = max(s.maxPerKey, n)
	return r.Object, true
}

func (s *Server) handleObject(w http.ResponseWriter, r *http.Request) {
	o, ok := s.Object(r.PathValue("id"))
	if !ok {
		writeError(w, http.StatusNotFound, "no such object")
		return
	}
	writeJSON(w, http.StatusOK, o)
}

type listing struct {
	Objects []Object `json:"objects"`
}

// MaxObjectsPerRead is how many ids one GET /v1/objects may name.
const MaxObjectsPerRead = 100

// handleObjects answers GET /v1/objects?id=A&id=B...: the objects among those ids, in the
// order asked, an id with no object left out. Like GET /v1/objects/{id} it is consistent
// (no listing lag): a committed object is there.
func (s *Server) handleObjects(w http.ResponseWriter, r *http.Request) {
	ids := r.URL.Query()["id"]
	switch {
	case len(ids) == 0:
		writeError(w, http.StatusBadRequest, "name the objects: ?id=A&id=B")
		return
	case len(ids) > MaxObjectsPerRead:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%d ids: at most %d per read", len(ids), MaxObjectsPerRead))
		return
	}
	out := listing{Objects: make([]Object, 0, len(ids))}
	s.mu.Lock()
	for _, id := range ids {
		if rec, ok := s.objects[id]; ok {
			out.Objects = append(out.Objects, rec.Object)
		}
	}
	s.reads++
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	account := r.PathValue("account")
	key, filtered := r.URL.Query()["key"]
	out := listing{Objects: []Object{}}
	s.mu.Lock()
	candidates := s.byAccount[account]
	if filtered {
		candidates = s.byKey[key[0]]
		s.lookups[key[0]]++
	}
	for _, rec := range candidates {
		if rec.Account == account && time.Since(rec.born) >= s.cfg.ListLag {
			out.Objects = append(out.Objects, rec.Object)
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// Idempotency statuses, the answers of GET /v1/idempotency/{key}. The answer is about the
// moment it is given: a request still on its way to the platform is none of them yet, which
// is why a caller waits its reconcile delay before it asks.
const (
	// StatusCreated: a create with the key committed; "id" names its first object.
	StatusCreated = "created"
	// StatusInProgress: nothing committed yet, and a create with the key is being handled now
	// (inside Config.Latency or a delay fault, or just arrived).
	StatusInProgress = "in_progress"
	// StatusNotSeen: nothing committed and nothing in progress. Requests with the key that
	// were dropped or refused created nothing, so they leave the answer at not_seen.
	StatusNotSeen = "not_seen"
)

type statusAnswer struct {
	Status string `json:"status"`
	ID     string `json:"id,omitempty"`
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.StatusLookup {
		writeError(w, http.StatusNotFound, "this platform has no idempotency-status lookup")
		return
	}
	key := r.PathValue("key")
	a := statusAnswer{Status: StatusNotSeen}
	s.mu.Lock()
	s.lookups[key]++
	switch {
	case len(s.byKey[key]) > 0:
		a = statusAnswer{Status: StatusCreated, ID: s.byKey[key][0].ID}
	case s.inflight[key] > 0:
		a.Status = StatusInProgress
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, a)
}

func (s *Server) handleCounts(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Counts())
}

func (s *Server) handleGetPlan(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Plan())
}

func (s *Server) handlePutPlan(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "reading the plan: "+err.Error())
		return
	}
	p, err := ParsePlan(body)
	if err == nil {
		err = s.SetPlan(p)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, s.Plan())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value written here is a plain struct or map of strings and numbers.
		http.Error(w, `{"error":"encoding the answer"}`, http.StatusInternalServerError)
		return
	}
	b = append(b, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

type errorAnswer struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorAnswer{Error: msg})
}
