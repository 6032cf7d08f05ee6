package dispatch

import (
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/sim"
	"github.com/atmost/atmost/pkg/platform/webhook"
)

// Platforms are the adapters a dispatcher process can open, by the platform name an account's
// configuration gives.
func Platforms() platform.Registry {
	return platform.Registry{
		sim.Name:     sim.Open,
		webhook.Name: webhook.Open,
	}
}
