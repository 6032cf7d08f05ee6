package platformsim

import "math/rand/v2"

// drawer hands out the faults of a plan in arrival order. It is not safe for concurrent use:
// the server calls it under its mutex, which is what makes the order the arrival order.
type drawer struct {
	plan Plan
	next int // index of the next script entry
	rng  *rand.Rand
	// cumulative[i] is the probability of Faults[0..i], for the faults with a rate.
	cumulative []float64
	kinds      []Fault
}

func newDrawer(p Plan) *drawer {
	d := &drawer{plan: p.clone(), rng: rand.New(rand.NewPCG(uint64(p.Seed), 0x61746d6f7374))}
	sum := 0.0
	for _, f := range Faults {
		if r := p.Rates[f]; r > 0 {
			sum += r
			d.cumulative = append(d.cumulative, sum)
			d.kinds = append(d.kinds, f)
		}
	}
	return d
}

// draw returns the fault of the next create request.
func (d *drawer) draw() Fault {
	if d.next < len(d.plan.Script) {
		f := d.plan.Script[d.next]
		d.next++
		return f
	}
	if len(d.kinds) == 0 {
		return FaultOK
	}
	x := d.rng.Float64()
	for i, c := range d.cumulative {
		if x < c {
			return d.kinds[i]
		}
	}
	return FaultOK
}
