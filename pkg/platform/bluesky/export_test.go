package bluesky

import (
	"time"

	"github.com/atmost/atmost/pkg/platform"
)

// SetClock replaces the adapter's clock (createdAt, and when an access token counts as
// expired).
func SetClock(ad platform.Adapter, now func() time.Time) { ad.(*adapter).now = now }

// CloseIdle closes the adapter's idle createRecord connections.
func CloseIdle(ad platform.Adapter) { ad.(*adapter).client.CloseIdle() }
