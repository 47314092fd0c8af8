package app

import "github.com/alicebob/miniredis/v2"

// Miniredis returns the embedded Redis of a, nil on a real server (tests
// only: it moves Redis's clock).
func Miniredis(a *App) *miniredis.Miniredis { return a.in.mini }
