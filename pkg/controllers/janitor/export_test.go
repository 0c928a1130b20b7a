package janitor

import "time"

// SetClock lets the tests move the janitor's time.
func (j *Janitor) SetClock(now func() time.Time) { j.now = now }
