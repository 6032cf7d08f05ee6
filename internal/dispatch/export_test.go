package dispatch

// SetCrash makes the dispatcher call f at each crash point (tests only).
func SetCrash(f func(step string)) { crash = f }
