package role

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// KeepAlive tells JetStream every interval that msg is still being worked (InProgress), so a
// turn longer than the consumer's AckWait (a send, a lookup) is not redelivered to another
// process meanwhile, until stop is called; stop may be called more than once. Take a third of
// the AckWait: two reminders may be lost before the server gives the message away.
func KeepAlive(msg jetstream.Msg, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	var once sync.Once
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	return func() { once.Do(func() { close(done) }) }
}
