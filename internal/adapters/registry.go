package adapters

import (
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/bluesky"
	"github.com/atmost/atmost/pkg/platform/email"
	"github.com/atmost/atmost/pkg/platform/matrix"
	"github.com/atmost/atmost/pkg/platform/sim"
	"github.com/atmost/atmost/pkg/platform/webhook"
)

// Builtin are the adapters atmost's roles can open, by the platform name an account's
// configuration gives.
func Builtin() platform.Registry {
	return platform.Registry{
		bluesky.Name: bluesky.Open,
		email.Name:   email.Open,
		matrix.Name:  matrix.Open,
		sim.Name:     sim.Open,
		webhook.Name: webhook.Open,
	}
}
