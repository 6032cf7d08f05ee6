package dispatch

import (
	"sync/atomic"
	"time"
)

// gather is waiting, and then, while more is on its way (coming counts it; took is called
// for each item taken, first included, and counts it off), what arrives within linger, up to
// limit in all. due, if not nil, says coming may have reached 0 without an item arriving.
func gather[T any](first T, ch <-chan T, limit int, coming *atomic.Int64, due <-chan struct{}, linger time.Duration, took func(T)) []T {
	batch := waiting(first, ch, limit)
	for _, x := range batch {
		took(x)
	}
	if len(batch) >= limit || coming.Load() <= 0 {
		return batch
	}
	t := time.NewTimer(linger)
	defer t.Stop()
	for len(batch) < limit && coming.Load() > 0 {
		select {
		case x, ok := <-ch:
			if !ok {
				return batch
			}
			took(x)
			batch = append(batch, x)
		case <-due:
		case <-t.C:
			return batch
		}
	}
	return batch
}

// waiting returns first and whatever else is already waiting on ch, up to limit in all,
// without waiting for more.
func waiting[T any](first T, ch <-chan T, limit int) []T {
	batch := []T{first}
	for len(batch) < limit {
		select {
		case v, ok := <-ch:
			if !ok {
				return batch
			}
			batch = append(batch, v)
		default:
			return batch
		}
	}
	return batch
}
