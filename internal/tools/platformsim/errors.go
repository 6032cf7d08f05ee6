package platformsim

import "errors"

// ErrInvalidConfig: a Config field is out of range. The error text names the field.
var ErrInvalidConfig = errors.New("platformsim: invalid config")

// ErrInvalidPlan: a fault plan names an unknown fault, has rates outside [0, 1] or summing
// above 1, a negative delay, an out-of-range status, or is not the JSON of a plan.
var ErrInvalidPlan = errors.New("platformsim: invalid fault plan")
