//go:build !unix

package load

import "time"

func selfCPU() (time.Duration, bool) { return 0, false }
