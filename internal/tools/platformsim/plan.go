package platformsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"
)

// Fault is what the simulator does to one create request.
type Fault string

// The faults. Only the commit faults (FaultOK, FaultDelay, FaultDropAfterCommit,
// FaultErrorAfterCommit) create anything; a dropped connection is a hijacked and closed TCP
// connection, so the client sees no HTTP answer at all.
const (
	// FaultOK creates the object and answers 201.
	FaultOK Fault = "ok"
	// FaultDropBeforeRead closes the connection without reading the body: nothing is created.
	FaultDropBeforeRead Fault = "drop_before_read"
	// FaultDropAfterRead reads the whole body, then closes the connection: nothing is created.
	FaultDropAfterRead Fault = "drop_after_read"
	// FaultDropAfterCommit creates the object, then closes the connection without answering.
	FaultDropAfterCommit Fault = "drop_after_commit"
	// FaultErrorAfterCommit creates the object, then answers 500.
	FaultErrorAfterCommit Fault = "error_after_commit"
	// FaultDelay sleeps Plan.Delay, then creates the object and answers 201, whether or not
	// the client is still there: a real platform commits what it received.
	FaultDelay Fault = "delay"
	// FaultRateLimited answers 429 with Retry-After: nothing is created.
	FaultRateLimited Fault = "rate_limited"
	// FaultReject answers Plan.DefinitiveStatus (default 422): nothing is created.
	FaultReject Fault = "reject"
)

// Faults lists every fault, in the fixed order in which rates are drawn.
var Faults = []Fault{FaultOK, FaultDropBeforeRead, FaultDropAfterRead, FaultDropAfterCommit,
	FaultErrorAfterCommit, FaultDelay, FaultRateLimited, FaultReject}

// Creates reports whether f commits an object (when the request itself is valid).
func (f Fault) Creates() bool {
	switch f {
	case FaultOK, FaultDelay, FaultDropAfterCommit, FaultErrorAfterCommit:
		return true
	}
	return false
}

func (f Fault) known() bool {
	for _, k := range Faults {
		if f == k {
			return true
		}
	}
	return false
}

// Plan says which fault each create request meets. The Script is consumed in arrival order
// by the first create requests (one entry each); once it is used up, every request draws a
// fault from Rates with a math/rand generator seeded by Seed, the remaining probability being
// FaultOK. Under a single sequential client the sequence of faults is a function of the plan
// alone. Replacing the plan (Server.SetPlan, PUT /v1/plan) restarts the script and the
// generator. The zero Plan injects nothing.
//
// A fault is drawn as a create request arrives, before its body is read: a request without an
// Idempotency-Key or with an invalid action is refused (400) without drawing one, while a
// request whose body turns out not to be a JSON object has drawn its fault and is refused
// after the drop and refusal faults had their turn.
//
// Its JSON form: {"seed": 1, "script": ["ok", "drop_after_commit"], "rates":
// {"delay": 0.01}, "delay": "3s", "definitive_status": 422}; unknown fields are refused.
type Plan struct {
	// Seed seeds the generator that draws from Rates.
	Seed int64
	// Script holds the faults of the first create requests, in arrival order.
	Script []Fault
	// Rates gives each fault's probability once the script is used up. Each rate is in
	// [0, 1] and they sum to at most 1.
	Rates map[Fault]float64
	// Delay is how long FaultDelay sleeps before committing. Default 1 s.
	Delay time.Duration
	// DefinitiveStatus is what FaultReject answers, 400-599. Default 422.
	DefinitiveStatus int
}

const (
	defaultDelay            = time.Second
	defaultDefinitiveStatus = http.StatusUnprocessableEntity
)

// delay returns the delay a FaultDelay sleeps.
func (p Plan) delay() time.Duration {
	if p.Delay == 0 {
		return defaultDelay
	}
	return p.Delay
}

// definitiveStatus returns the status a FaultReject answers.
func (p Plan) definitiveStatus() int {
	if p.DefinitiveStatus == 0 {
		return defaultDefinitiveStatus
	}
	return p.DefinitiveStatus
}

// validate reports the first thing wrong with p, wrapping ErrInvalidPlan.
func (p Plan) validate() error {
	for i, f := range p.Script {
		if !f.known() {
			return fmt.Errorf("%w: script[%d]: unknown fault %q (known: %v)", ErrInvalidPlan, i, f, Faults)
		}
	}
	sum := 0.0
	for _, f := range Faults { // a fixed order, so the error is the same every time
		r, ok := p.Rates[f]
		if !ok {
			continue
		}
		if math.IsNaN(r) || r < 0 || r > 1 {
			return fmt.Errorf("%w: rate of %s is %v: must be between 0 and 1", ErrInvalidPlan, f, r)
		}
		sum += r
	}
	for f := range p.Rates {
		if !f.known() {
			return fmt.Errorf("%w: rates: unknown fault %q (known: %v)", ErrInvalidPlan, f, Faults)
		}
	}
	if sum > 1+1e-9 {
		return fmt.Errorf("%w: rates sum to %v: must be at most 1", ErrInvalidPlan, sum)
	}
	if p.Delay < 0 {
		return fmt.Errorf("%w: delay %s: must not be negative", ErrInvalidPlan, p.Delay)
	}
	if p.DefinitiveStatus != 0 && (p.DefinitiveStatus < 400 || p.DefinitiveStatus > 599) {
		return fmt.Errorf("%w: definitive_status %d: must be between 400 and 599", ErrInvalidPlan, p.DefinitiveStatus)
	}
	return nil
}

// planJSON is the wire form of a Plan.
type planJSON struct {
	Seed             int64             `json:"seed"`
	Script           []Fault           `json:"script,omitempty"`
	Rates            map[Fault]float64 `json:"rates,omitempty"`
	Delay            string            `json:"delay,omitempty"`
	DefinitiveStatus int               `json:"definitive_status,omitempty"`
}

// MarshalJSON writes the plan's JSON form, the delay as a Go duration ("1.5s").
func (p Plan) MarshalJSON() ([]byte, error) {
	w := planJSON{Seed: p.Seed, Script: p.Script, Rates: p.Rates, DefinitiveStatus: p.DefinitiveStatus}
	if p.Delay != 0 {
		w.Delay = p.Delay.String()
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the plan's JSON form strictly (unknown fields and trailing data are
// errors) and validates it; every error wraps ErrInvalidPlan.
func (p *Plan) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w planJSON
	if err := dec.Decode(&w); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidPlan, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: data after the plan object", ErrInvalidPlan)
	}
	plan := Plan{Seed: w.Seed, Script: w.Script, Rates: w.Rates, DefinitiveStatus: w.DefinitiveStatus}
	if w.Delay != "" {
		d, err := time.ParseDuration(w.Delay)
		if err != nil {
			return fmt.Errorf("%w: delay %q: %v", ErrInvalidPlan, w.Delay, err)
		}
		plan.Delay = d
	}
	if err := plan.validate(); err != nil {
		return err
	}
	*p = plan
	return nil
}

// ParsePlan reads a plan from its JSON form. Errors wrap ErrInvalidPlan.
func ParsePlan(data []byte) (Plan, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return Plan{}, fmt.Errorf("%w: empty", ErrInvalidPlan)
	}
	var p Plan
	err := p.UnmarshalJSON(data)
	return p, err
}

// clone returns a deep copy, so that a caller's later edits never reach a running plan.
func (p Plan) clone() Plan {
	c := p
	if p.Script != nil {
		c.Script = append([]Fault(nil), p.Script...)
	}
	if p.Rates != nil {
		c.Rates = make(map[Fault]float64, len(p.Rates))
		for f, r := range p.Rates {
			c.Rates[f] = r
		}
	}
	return c
}
