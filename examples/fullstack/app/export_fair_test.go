package app

import "context"

// FairPublished reads the fair sale's published record (admin: queue
// published).
func FairPublished(ctx context.Context, a *App) (Published, error) { return a.FairPublished(ctx) }

// FairStatsOf reads the fair sale's figures (admin: queue stats).
func FairStatsOf(ctx context.Context, a *App) (FairStats, error) { return a.FairStats(ctx) }

// PauseQueue pauses or resumes the queue's admission (admin: queue pause).
func PauseQueue(ctx context.Context, a *App, paused bool) error {
	return a.p.fair.room.SetPaused(ctx, a.p.fair.sale, paused)
}

// FairAdmits is how many users this instance's Admit calls admitted.
func FairAdmits(a *App) float64 { return float64(a.p.fair.admitsN.Load()) }
