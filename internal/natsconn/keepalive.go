package natsconn

import (
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// KeepAlive tells JetStream every interval that msg is still being worked (InProgress), so a
// turn longer than the consumer's AckWait (a send, a lookup) is not redelivered to another
// process meanwhile, until stop is called; stop may be called more than once. Take a third of
// the AckWait: two reminders may be lost before the server gives the message away.
//
// It is a timer that sets itself again, not a goroutine with a ticker: the dispatcher keeps
// every work item of a batch alive, and nearly all of them are acknowledged long before the
// first reminder is due, so a goroutine, a ticker and a channel per work item (about 9 µs of
// CPU an intent in the end-to-end benchmark) bought nothing. Once stop returns no reminder is
// sent.
func KeepAlive(msg jetstream.Msg, interval time.Duration) (stop func()) {
	if interval <= 0 {
		// A timer set again at once would send reminders without end; the roles refuse an
		// AckWait under a second.
		panic(fmt.Sprintf("natsconn: KeepAlive needs a positive interval, not %s", interval))
	}
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(interval, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			_ = msg.InProgress()
			t.Reset(interval)
		}
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}
