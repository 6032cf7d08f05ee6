package dispatch

import (
	"context"
	"reflect"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/adapters"
	"github.com/atmost/atmost/pkg/platform"
)

// offTheReads counts off underway a send that brings the read loop no read, and wakes the
// loop's wait if it was the last one on its way.
func (d *Dispatcher) offTheReads() {
	if d.underway.Add(-1) == 0 {
		select {
		case d.readsDue <- struct{}{}:
		default:
		}
	}
}

// read is one claimed success waiting for its read-back; the verdict arrives on done.
type read struct {
	w        *work
	objectID string
	deadline time.Time // the read-back budget's end
	done     chan readVerdict
}

type readVerdict struct {
	confirmed bool
	why       string
	detail    string
}

// Read-backs are grouped: the claimed successes waiting when a group starts, and those of the
// sends still on their way that arrive within the linger, go together, up to maxReadGroup,
// and readPipelines groups are read at once.
const (
	maxReadGroup  = 100
	readPipelines = 2
)

// readBack fetches the object the platform named and compares its text with the intent's,
// within the read-back budget. Where the adapter reads many objects at once it waits for the
// read loop, which reads the objects of many sends in one request; otherwise it reads alone.
func (d *Dispatcher) readBack(w *work, objectID string) (bool, string) {
	r := &read{w: w, objectID: objectID, deadline: time.Now().Add(d.cfg.ReadBackTimeout), done: make(chan readVerdict, 1)}
	if _, ok := w.adapter.(platform.ManyReader); ok {
		d.reads <- r // the read loop counts it off underway
	} else {
		d.offTheReads()
		d.readAlone(r, nil)
	}
	v := <-r.done
	if !v.confirmed {
		d.counts.readBack(v.why)
	}
	return v.confirmed, v.detail
}

// readLoop groups the read-backs (gather); it returns when reads is closed and every group it
// started has its verdicts.
func (d *Dispatcher) readLoop() {
	var groups sync.WaitGroup
	defer groups.Wait()
	slots := make(chan struct{}, readPipelines)
	for first := range d.reads {
		slots <- struct{}{} // while every pipeline reads, the next group grows
		group := gather(first, d.reads, maxReadGroup, &d.underway, d.readsDue, d.cfg.Linger, func(*read) { d.underway.Add(-1) })
		groups.Add(1)
		go func() {
			defer groups.Done()
			defer func() { <-slots }()
			d.readGroup(group)
		}()
	}
}

// readGroup reads a group, one request per adapter (each reads many objects at once). Each
// read whose grouped answer could not tell (not found yet, failed, or about another object
// than the one asked for) is read again on its own within its budget, without holding up the
// group.
func (d *Dispatcher) readGroup(group []*read) {
	byAdapter := map[platform.Adapter][]*read{}
	var apart [][]*read
	for _, r := range group {
		if !reflect.TypeOf(r.w.adapter).Comparable() {
			// An adapter value that cannot be a map key (a struct holding a map or a slice,
			// say) reads its objects in groups of one.
			apart = append(apart, []*read{r})
			continue
		}
		byAdapter[r.w.adapter] = append(byAdapter[r.w.adapter], r)
	}
	for _, reads := range byAdapter {
		apart = append(apart, reads)
	}
	var reading sync.WaitGroup
	for _, reads := range apart {
		reading.Go(func() { d.readMany(reads) })
	}
	reading.Wait()
}

// readMany reads the objects of reads, all of one adapter, with one grouped read and delivers
// each verdict, or reads alone what the grouped read could not tell.
func (d *Dispatcher) readMany(reads []*read) {
	items := make([]platform.ReadItem, len(reads))
	earliest := reads[0].deadline
	for i, r := range reads {
		items[i] = platform.ReadItem{Request: r.w.request, ObjectID: r.objectID}
		if r.deadline.Before(earliest) {
			earliest = r.deadline
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), earliest)
	defer cancel()
	// An adapter that ignored its context would hold up every read-back and the shutdown:
	// its answer is waited for only until the context ends.
	answered := make(chan []platform.ReadResult, 1)
	go func() { answered <- reads[0].w.adapter.(platform.ManyReader).ReadBackMany(ctx, items) }()
	var results []platform.ReadResult
	select {
	case results = <-answered:
	case <-ctx.Done():
	}
	if len(results) != len(items) {
		if results != nil {
			// An adapter that broke its contract: trust none of it; read each alone.
			d.log.Error("a grouped read-back answered for the wrong number of objects; reading them one by one",
				zap.Int("asked", len(items)), zap.Int("answered", len(results)))
		}
		for _, r := range reads {
			d.readAlone(r, nil)
		}
		return
	}
	for i, r := range reads {
		var v readVerdict
		var final bool
		if results[i].Err == nil && results[i].Object.ID != r.objectID {
			// An answer about another object proves nothing about this one.
			d.readAlone(r, nil)
			continue
		}
		v.confirmed, v.why, v.detail, final = adapters.Judge(r.w.request, results[i].Object, results[i].Err)
		if !final {
			d.readAlone(r, &results[i])
			continue
		}
		r.done <- v
	}
}

// readAlone reads r's object on its own, within r's budget, and delivers the verdict; first
// is the answer a grouped read already gave, if any.
func (d *Dispatcher) readAlone(r *read, first *platform.ReadResult) {
	go func() {
		ctx, cancel := context.WithDeadline(context.Background(), r.deadline)
		defer cancel()
		var v readVerdict
		if first != nil {
			v.confirmed, v.why, v.detail = adapters.ReadBackAfter(ctx, r.w.adapter, r.w.request, r.objectID, *first)
		} else {
			v.confirmed, v.why, v.detail = adapters.ReadBack(ctx, r.w.adapter, r.w.request, r.objectID)
		}
		r.done <- v
	}()
}
