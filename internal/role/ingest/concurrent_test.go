package ingest_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/pkg/ledger"
)

// Two ingest processes on one durable consumer, with an AckWait far shorter than a batch takes,
// so JetStream redelivers messages that are still being worked: exactly one intent per
// delivery key all the same.
func TestForcedRedeliveryAndTwoIngestersMakeOneIntentPerKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const intents = 300
	for i := 0; i < intents; i++ {
		e.publish("acct-1", post(fmt.Sprintf("redelivered %d", i)), nil)
	}
	var wg sync.WaitGroup
	totals := make([]ingest.Stats, 2)
	for w := range totals {
		l, err := ledger.New(e.DB.AppPool(t), ledger.Config{Actor: fmt.Sprintf("ingest-%d", w)})
		require.NoError(t, err)
		in, err := ingest.New(e.Ctx, e.JS, l, ingest.Config{Batch: 50, AckWait: 20 * time.Millisecond, MaxWait: 100 * time.Millisecond})
		require.NoError(t, err)
		wg.Go(func() {
			idle := 0
			for idle < 5 {
				s, err := in.Batch(e.Ctx)
				if !assert.NoError(t, err) {
					return
				}
				if s == (ingest.Stats{}) {
					idle++
					continue
				}
				idle = 0
				totals[w].Created += s.Created
				totals[w].Duplicates += s.Duplicates
			}
		})
	}
	wg.Wait()
	require.Equal(t, intents, e.Count(`SELECT count(*) FROM intents`))
	require.Equal(t, intents, totals[0].Created+totals[1].Created, "each intent created once between them")
	require.Equal(t, intents, e.Count(`SELECT count(*) FROM history`), "no second creation in history")
	t.Logf("created %d + %d, redeliveries absorbed as duplicates: %d", totals[0].Created, totals[1].Created, totals[0].Duplicates+totals[1].Duplicates)
}
