package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/reconcile"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/sim"
)

// A lookup is kept alive every third of the AckWait: one under a second is refused before the
// reconciler touches JetStream, as the dispatcher refuses it.
func TestAnAckWaitUnderASecondIsRefused(t *testing.T) {
	t.Parallel()
	_, err := reconcile.New(context.Background(), nil, nil, nil, reconcile.Config{
		Platforms: platform.Registry{sim.Name: sim.Open}, AckWait: 999 * time.Millisecond})
	require.ErrorContains(t, err, "ack wait 999ms: must be at least 1s")
}
