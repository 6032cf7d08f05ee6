package adapters

import (
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/bluesky"
	"github.com/atmost/atmost/pkg/platform/email"
	"github.com/atmost/atmost/pkg/platform/matrix"
	"github.com/atmost/atmost/pkg/platform/sim"
	"github.com/atmost/atmost/pkg/platform/webhook"
)

// atmost's own adapters, registered before any program's main runs: a program built on atmost
// adds its own with platform.Register.
func init() {
	platform.Register(bluesky.Name, bluesky.Open)
	platform.Register(email.Name, email.Open)
	platform.Register(matrix.Name, matrix.Open)
	platform.Register(sim.Name, sim.Open)
	platform.Register(webhook.Name, webhook.Open)
}

// Registered are the adapters atmost's roles can open, by the platform name an account's
// configuration gives: atmost's own and those the program registered (platform.Register).
func Registered() platform.Registry { return platform.Registered() }
