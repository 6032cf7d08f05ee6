package dispatch

import dto "github.com/prometheus/client_model/go"

// WorkCount is atmost_dispatch_work_total{result} of d.
func WorkCount(d *Dispatcher, result string) float64 {
	var m dto.Metric
	if err := d.counts.works.WithLabelValues(result).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// SetCrash makes the dispatcher call f at each crash point (tests only).
func SetCrash(f func(step string)) { crash = f }

// WithHook returns cfg with f called at each crash point of the dispatcher it configures.
func WithHook(cfg Config, f func(step string)) Config {
	cfg.hook = f
	return cfg
}
