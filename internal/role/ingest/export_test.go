package ingest

// SetCrash makes the ingester call f at each crash point (tests only).
func SetCrash(f func(step string)) { crash = f }
