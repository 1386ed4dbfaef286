//go:build !unix

package loadtest

import "time"

// processCPU cannot be read on this platform.
func processCPU() (time.Duration, bool) { return 0, false }
